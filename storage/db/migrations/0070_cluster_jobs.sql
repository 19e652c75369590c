-- Cluster jobs (issue 23 item 6, docs/builds.md "Cluster jobs"): a build that needs several workers
-- at once. One row per placement attempt: reserved (members held, waiting for them to be idle),
-- preparing (sent; every member must accept), running, then finished, aborted (a member did not
-- accept in time, refused or was lost) or expired (a reservation held past
-- scheduler.clusterReserveTimeoutSecs). At most one active row per build: the server process that
-- inserts it places the job, another's insert finds the conflict and leaves it alone.
create table cluster_jobs (
  id uuid primary key,
  derivation_build_id uuid not null references derivation_builds (id) on delete cascade,
  state text not null check (state in ('reserved', 'preparing', 'running', 'finished', 'aborted', 'expired')),
  -- the members' zone (worker.zone); null: the zone of unlabelled workers
  zone text,
  -- worker ids in rank order; rank 0 builds the derivation
  members uuid[] not null check (cardinality(members) between 2 and 64),
  created_at timestamptz not null,
  -- a reservation's expiry, a preparation's deadline; null while running
  deadline timestamptz,
  finished_at timestamptz,
  reason text
);
create unique index cluster_jobs_active on cluster_jobs (derivation_build_id) where state in ('reserved', 'preparing', 'running');
create index cluster_jobs_finished on cluster_jobs (finished_at) where finished_at is not null;
