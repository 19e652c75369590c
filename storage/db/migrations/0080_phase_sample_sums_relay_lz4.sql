-- Issue 23 (dispatch): less for PostgreSQL to write per dispatched build.
--
-- A phase_samples row may sum several samples of one kind and phase (the process's buffer sums
-- each second's: a burst of dispatches wrote two rows per build): `samples` how many,
-- `duration_ms` their total, `max_ms` the longest. Rows written before count as one sample each.
alter table phase_samples
  add column samples integer not null default 1 check (samples >= 1),
  add column max_ms bigint check (max_ms >= 0);

-- The PostgreSQL relay's rows (a turn's events as JSON, ~3 KB per dispatched build) compressed
-- with lz4 instead of pglz, several times cheaper to compress (pglz was PostgreSQL's busiest
-- function during dispatch). A PostgreSQL built without lz4 keeps pglz.
do $$
begin
  alter table event_relay alter column payload set compression lz4;
exception when feature_not_supported then
  null;
end $$;
