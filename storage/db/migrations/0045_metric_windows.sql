-- Stored metrics, second part (issue 21 item 2, docs/metrics.md "Stored metrics").
-- Each worker sample names the connection it came from: who may read a sample is decided by the
-- projects that connection authenticated for (a worker id is only claimed by the worker, so the id
-- alone proves no ownership). Samples written before this migration have none: superusers only.
alter table worker_samples add column connection_id uuid;

-- The instance-wide window (metrics.instanceIntervalSecs): one row per interval, written by
-- whichever server process gets there first (the values are read from PostgreSQL, the same for
-- every process); raw samples, kept metrics.retention.rawDays.
create table instance_samples (
  sampled_at timestamptz primary key,
  workers_connected int not null,
  build_slots int not null,
  builds_running int not null,
  eval_slots int not null,
  evals_running int not null,
  builds_queued int not null,
  evaluations_queued int not null,
  evaluations_open int not null
);

-- NAR file fetches per cache, NAR file (its hash, as in the URL) and UTC day: the cache board's top fetched paths. Each server
-- process adds what it counted at its traffic flush (metrics.cacheFlushIntervalSecs); kept
-- metrics.retention.rawDays like the minute counters.
create table cache_path_fetches (
  cache_id uuid not null references caches on delete cascade,
  day date not null,
  file_hash text not null,
  fetches bigint not null default 0,
  bytes bigint not null default 0,
  primary key (cache_id, day, file_hash)
);
create index cache_path_fetches_day on cache_path_fetches (day);

-- A build attempt's resources so far (worker.build.metrics): the heartbeats of the worker running it
-- keep a row with running = true up to date; the job's result replaces it with the final counters.
alter table build_resource_samples add column running boolean not null default false;
