-- Indexes for the series read at every Prometheus scrape (services/metrics/serverMetrics.ts,
-- docs/metrics.md): the webhook backlog counts unfinished deliveries without reading the
-- finished ones, which are nearly all of the table.
create index event_deliveries_open on event_deliveries (status) where status in ('pending', 'attempting', 'retrying');
