-- Direct builds and source uploads (issue 7, docs/builds.md "Direct builds", "Source uploads").
--
-- A direct build is a derivation submitted over REST instead of found by evaluating a flake. It is
-- recorded as an evaluation of kind 'direct' in the project's task "direct", so the scheduler
-- dispatches its builds like any evaluation's (it has no commit, so it is never an eval job).
alter table evaluations add column kind text not null default 'flake' check (kind in ('flake', 'direct'));
create index evaluations_direct_by_user on evaluations (created_by, created_at desc) where kind = 'direct';
create index evaluations_commit on evaluations (commit) where commit is not null;

-- A source tarball uploaded for a build request; the bytes are a blob under build-sources/.
create table source_uploads (
  id uuid primary key default gen_random_uuid(),
  project_id uuid not null references projects on delete cascade,
  created_by uuid references users on delete set null,
  blob_key text not null,
  size bigint not null check (size > 0),
  -- hex SHA-256 of the uploaded bytes
  sha256 text not null check (sha256 ~ '^[0-9a-f]{64}$'),
  -- gzip, zstd, xz, bzip2 or tar (from the magic bytes)
  format text not null,
  -- hex SHA-256 of the fetch token; the token is shown once, in the fetch URL
  token_hash text not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null
);
create index source_uploads_expiry on source_uploads (expires_at);
