-- Issue 23 (dispatch): less for PostgreSQL to do per dispatched build.
--
-- A phase_samples row may sum several samples of one kind and phase (the process's buffer sums
-- each second's: a burst of dispatches wrote two rows per build): `samples` how many,
-- `duration_ms` their total, `max_ms` the longest. Rows written before count as one sample each.
-- The checks are added NOT VALID: a check added with the column scans the whole table under the
-- ALTER's exclusive lock (review r5b-3), and validating in this transaction would too. They hold
-- for every new row; the rows written before have 1 and null, the defaults, which satisfy them.
alter table phase_samples
  add column samples integer not null default 1,
  add column max_ms bigint;
alter table phase_samples add constraint phase_samples_samples_check check (samples >= 1) not valid;
alter table phase_samples add constraint phase_samples_max_ms_check check (max_ms >= 0) not valid;

-- The PostgreSQL relay's rows (a turn's events as JSON, ~3 KB per dispatched build) compressed
-- with lz4 instead of pglz, several times cheaper to compress (pglz was PostgreSQL's busiest
-- function during dispatch). A PostgreSQL built without lz4, or older than 14 (no per-column
-- compression), keeps pglz.
do $$
begin
  -- no rewrite, but an exclusive lock: give up (keeping pglz) rather than queue every relay insert behind a long read
  set local lock_timeout = '5s';
  execute 'alter table event_relay alter column payload set compression lz4';
exception when feature_not_supported or syntax_error or lock_not_available then
  null;
end $$;

-- The output size trigger (0077) took each output's hash part with a regular expression, 50-130 µs
-- an output on PostgreSQL's regex engine (the capture and the {32} repetition), once per finished
-- build: the largest single cost of a completion batch. The same hash part by plain string
-- functions (~5 µs): the last path component's first 32 characters, when a '/' precedes it and a
-- '-' follows them. It differs from the expression only for characters outside Nix's base-32
-- alphabet, which no cached_paths.hash_part holds (its check), so the sizes found are the same.
create function kiln_store_hash_part(path text) returns text language sql immutable parallel safe as $$
  select case when strpos(path, '/') > 0 and substr(right(path, strpos(reverse(path), '/') - 1), 33, 1) = '-'
              then left(right(path, strpos(reverse(path), '/') - 1), 32) end
$$;

create or replace function record_output_nar_sizes() returns trigger language plpgsql as $$
begin
  update derivations d set output_nar_size = held.size
  from (
    select x.id, sum(s.nar_size) as size
    from (select distinct derivation_id from finished_rows where status in ('completed', 'substituted')) f
    join derivations x on x.id = f.derivation_id and x.output_nar_size is null
    cross join lateral jsonb_each_text(x.outputs) o(name, path)
    cross join lateral (
      select max(cp.nar_size) as nar_size from cached_paths cp where cp.hash_part = kiln_store_hash_part(o.path)
    ) s
    group by x.id
  ) held
  where d.id = held.id and held.size is not null;
  return null;
end $$;
