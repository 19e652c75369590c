-- Job phase timings (issue 21, docs/metrics.md "Stored metrics: job phases").
-- When an evaluation last became dispatchable (entered queued: created, re-queued, approved, room
-- again): the start of its dispatch latency, as derivation_builds.queued_at is a build's.
alter table evaluations add column queued_at timestamptz not null default now();

-- Raw phase samples: one row per job phase that ended (kind evaluation or build; phase dispatch,
-- from becoming dispatchable to a worker taking the job, or run, the job on the worker), written in
-- batches by the process that saw it end; kept metrics.retention.rawDays.
create table phase_samples (
  kind text not null check (kind in ('evaluation', 'build')),
  phase text not null check (phase in ('dispatch', 'run')),
  ended_at timestamptz not null,
  duration_ms bigint not null check (duration_ms >= 0)
);
create index phase_samples_ended on phase_samples (ended_at);

-- Their rollups per minute, hour, day and week (UTC; weeks start on Monday), recomputed from the
-- level below every metrics.rollupIntervalSecs: how many, their total and their longest. Minutes and
-- hours kept metrics.retention.rollupDays, days and weeks forever.
create table phase_rollups (
  kind text not null,
  phase text not null,
  period text not null check (period in ('minute', 'hour', 'day', 'week')),
  start timestamptz not null,
  samples bigint not null,
  total_ms bigint not null,
  max_ms bigint not null,
  primary key (kind, phase, period, start)
);
create index phase_rollups_period_start on phase_rollups (period, start);
