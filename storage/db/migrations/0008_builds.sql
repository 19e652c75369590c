-- Evaluations, derivations and builds (issue 7, docs/builds.md).
--
-- A derivation is recorded once (by its .drv path) however many evaluations reach it, and it has
-- one shared derivation_build: the work of building it. An evaluation's builds point at the shared
-- derivation_build, so two evaluations of the same commit build nothing twice.

create table evaluations (
  id uuid primary key default gen_random_uuid(),
  task_id uuid not null references tasks on delete cascade,
  repository text not null check (length(repository) <= 2000),
  -- the commit evaluated; null until the head of the branch was resolved
  commit text check (commit ~ '^([0-9a-f]{40}|[0-9a-f]{64})$'),
  -- the attribute wildcard evaluated (the task's or the project's at creation time)
  wildcard text not null check (length(wildcard) <= 1000),
  phase text not null default 'queued' check (phase in (
    'queued', 'waiting', 'approval_granted', 'fetching', 'evaluating', 'building', 'completed', 'failed', 'aborted')),
  error text check (length(error) <= 20000),
  attempts integer not null default 0,
  worker_id uuid,
  created_by uuid references users on delete set null,
  created_at timestamptz not null default now(),
  started_at timestamptz,
  finished_at timestamptz,
  updated_at timestamptz not null default now()
);
create index evaluations_task on evaluations (task_id, created_at desc);
create index evaluations_open on evaluations (phase) where phase not in ('completed', 'failed', 'aborted');

create table derivations (
  id uuid primary key default gen_random_uuid(),
  drv_path text not null unique check (drv_path ~ '\.drv$' and length(drv_path) <= 400),
  name text not null,
  system text not null,
  required_features text[] not null default '{}',
  -- output name -> store path (null for a content-addressed output)
  outputs jsonb not null,
  input_srcs text[] not null default '{}',
  timeout_secs integer,
  max_silent_secs integer,
  prefer_local_build boolean not null default false,
  fixed_output boolean not null default false,
  created_at timestamptz not null default now()
);

-- What a derivation needs: one row per input derivation.
create table derivation_edges (
  derivation_id uuid not null references derivations on delete cascade,
  depends_on uuid not null references derivations on delete cascade,
  outputs text[] not null default '{}',
  primary key (derivation_id, depends_on)
);
create index derivation_edges_depends_on on derivation_edges (depends_on);

-- The one shared build of a derivation.
create table derivation_builds (
  id uuid primary key default gen_random_uuid(),
  derivation_id uuid not null unique references derivations on delete cascade,
  status text not null default 'queued' check (status in ('queued', 'started', 'completed', 'failed', 'substituted')),
  failure_class text check (failure_class in ('FailedPermanent', 'FailedTransient', 'FailedTimeout')),
  failure_reason text,
  failure_message text check (length(failure_message) <= 20000),
  attempts integer not null default 0,
  -- a transient failure waits until then before it is dispatched again
  not_before timestamptz,
  worker_id uuid,
  log_bytes bigint not null default 0,
  log_dropped_bytes bigint not null default 0,
  queued_at timestamptz not null default now(),
  started_at timestamptz,
  finished_at timestamptz,
  updated_at timestamptz not null default now()
);
create index derivation_builds_open on derivation_builds (status) where status in ('queued', 'started');

-- An evaluation's view of a derivation build; entry points are the builds an attribute names.
create table builds (
  id uuid primary key default gen_random_uuid(),
  evaluation_id uuid not null references evaluations on delete cascade,
  derivation_build_id uuid not null references derivation_builds on delete cascade,
  entry_point boolean not null default false,
  -- the attribute path (dotted) for entry points
  attr text,
  created_at timestamptz not null default now(),
  unique (evaluation_id, derivation_build_id)
);
create index builds_derivation_build on builds (derivation_build_id);
create index builds_entry_points on builds (evaluation_id) where entry_point;

create table evaluation_attribute_errors (
  evaluation_id uuid not null references evaluations on delete cascade,
  attr text not null,
  message text not null check (length(message) <= 20000),
  primary key (evaluation_id, attr)
);

-- Build logs in chunks of about log.chunkBytes, in order.
create table build_log_chunks (
  derivation_build_id uuid not null references derivation_builds on delete cascade,
  -- the attempt the chunk belongs to (1-based)
  attempt integer not null,
  seq integer not null,
  data bytea not null,
  created_at timestamptz not null default now(),
  primary key (derivation_build_id, attempt, seq)
);

-- Every /proto connection that finished the handshake, open or closed.
create table worker_connections (
  id uuid primary key default gen_random_uuid(),
  worker_id uuid not null,
  software text not null default '',
  address text not null default '',
  hello jsonb not null,
  projects uuid[] not null default '{}',
  open_mode boolean not null default false,
  connected_at timestamptz not null default now(),
  last_seen_at timestamptz not null default now(),
  disconnected_at timestamptz,
  close_code text,
  close_reason text
);
create index worker_connections_worker on worker_connections (worker_id, connected_at desc);
create index worker_connections_open on worker_connections (worker_id) where disconnected_at is null;
