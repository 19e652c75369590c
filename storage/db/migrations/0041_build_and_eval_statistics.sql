-- Per-build and per-evaluation statistics (issue 21 item 5, docs/metrics.md "Build and evaluation
-- statistics"). One row per build attempt that ended on a worker: its wall-clock time always, the
-- cgroup's CPU time, peak memory, disk I/O and OOM kills when the worker measured them
-- (worker.build.metrics). Kept retentionDays after it was recorded, like other per-build samples.
create table build_resource_samples (
  derivation_build_id uuid not null references derivation_builds on delete cascade,
  attempt int not null,
  recorded_at timestamptz not null,
  worker_id uuid,
  wall_ms bigint not null check (wall_ms >= 0),
  cpu_user_ms bigint check (cpu_user_ms >= 0),
  cpu_system_ms bigint check (cpu_system_ms >= 0),
  peak_memory_bytes bigint check (peak_memory_bytes >= 0),
  io_read_bytes bigint check (io_read_bytes >= 0),
  io_write_bytes bigint check (io_write_bytes >= 0),
  oom_kills int check (oom_kills >= 0),
  primary key (derivation_build_id, attempt)
);
create index build_resource_samples_recorded on build_resource_samples (recorded_at);

-- The evaluator's statistics (worker.eval.metrics) and the evaluation job's wall-clock time.
alter table evaluations add column eval_duration_ms bigint check (eval_duration_ms >= 0);
alter table evaluations add column eval_stats jsonb;

-- Worker samples (metrics.workerSampleIntervalSecs): what each connected worker's last heartbeat
-- said, one row per worker and sample, written by the process it is connected to; raw samples,
-- kept metrics.retention.rawDays.
create table worker_samples (
  worker_id uuid not null,
  sampled_at timestamptz not null,
  load1 real not null,
  memory_free_bytes bigint not null,
  memory_total_bytes bigint not null,
  store_free_bytes bigint,
  build_slots int not null,
  builds_running int not null,
  eval_slots int not null,
  evals_running int not null,
  primary key (worker_id, sampled_at)
);
create index worker_samples_sampled on worker_samples (sampled_at);
