-- Stored cache traffic (issue 21 item 2, docs/metrics.md "Stored metrics"): per-minute counters
-- that each server process adds to every metrics.cacheFlushIntervalSecs (the raw series, kept
-- metrics.retention.rawDays), and their hour, day and week rollups, recomputed from the level below
-- every metrics.rollupIntervalSecs (hours kept metrics.retention.rollupDays, days and weeks forever).
create table cache_traffic_minutes (
  cache_id uuid not null references caches (id) on delete cascade,
  minute timestamptz not null,
  narinfo_hits bigint not null default 0,
  narinfo_misses bigint not null default 0,
  upstream_hits bigint not null default 0,
  nar_bytes_served bigint not null default 0,
  primary key (cache_id, minute)
);
create index cache_traffic_minutes_minute on cache_traffic_minutes (minute);

create table cache_traffic_rollups (
  cache_id uuid not null references caches (id) on delete cascade,
  period text not null check (period in ('hour', 'day', 'week')),
  start timestamptz not null,
  narinfo_hits bigint not null default 0,
  narinfo_misses bigint not null default 0,
  upstream_hits bigint not null default 0,
  nar_bytes_served bigint not null default 0,
  primary key (cache_id, period, start)
);
create index cache_traffic_rollups_period_start on cache_traffic_rollups (period, start);
