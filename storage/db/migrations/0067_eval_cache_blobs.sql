-- The shared evaluation cache (issue 23 item 4, docs/worker.md "The shared evaluation cache"): Nix's
-- eval-cache SQLite files a worker uploaded after an evaluation, gzipped in blob storage under
-- eval-cache/<project>/<fingerprint>. A row belongs to one project and is offered only to that
-- project's evaluations, at the commit it was made for. No foreign key: a deleted project's rows
-- (and their blobs) go at the next sweep, which also applies eval.cache.maxAgeDays and
-- eval.cache.maxTotalBytes by least recent use.
create table eval_cache_blobs (
  project_id uuid not null,
  fingerprint text not null check (fingerprint ~ '^v[0-9]{1,3}-[0-9a-f]{64}$'),
  commit text check (commit ~ '^[0-9a-f]{40}([0-9a-f]{24})?$'),
  blob_key text not null,
  size bigint not null check (size >= 0),
  created_at timestamptz not null default now(),
  used_at timestamptz not null default now(),
  primary key (project_id, fingerprint)
);
create index eval_cache_blobs_commit on eval_cache_blobs (project_id, commit, used_at desc);
create index eval_cache_blobs_used on eval_cache_blobs (used_at);
