-- Rollups of the worker samples and of the instance window (issue 21, docs/metrics.md "Stored
-- metrics: worker and instance rollups"): per minute, hour, day and week (UTC; weeks start on
-- Monday), each measured value's count, sum, least and largest, recomputed from the level below
-- every metrics.rollupIntervalSecs as the phase rollups are. A worker's rows are per connection
-- (who may read them follows the connection's projects, as for its raw samples); the all-zero
-- uuid stands for "none": the instance's rows, and worker samples written before 0045 named their
-- connection. Minutes and hours kept metrics.retention.rollupDays, days and weeks forever.
create table sample_rollups (
  source text not null check (source in ('worker', 'instance')),
  worker_id uuid not null,
  connection_id uuid not null,
  metric text not null,
  period text not null check (period in ('minute', 'hour', 'day', 'week')),
  start timestamptz not null,
  samples bigint not null,
  total numeric not null,
  least_value numeric not null,
  greatest_value numeric not null,
  primary key (source, worker_id, connection_id, metric, period, start)
);
create index sample_rollups_period_start on sample_rollups (period, start);
