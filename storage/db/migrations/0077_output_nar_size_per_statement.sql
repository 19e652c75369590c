-- The recorded output size (0052) per statement instead of per row (issue 23, dispatch): the
-- scheduler finishes builds in batches of a hundred and more, and the row trigger ran a PL/pgSQL
-- update per finished build, ~40 µs each, close to half of the completion statement's time. One
-- statement-level trigger now sizes every derivation a statement finished at once, from the rows it
-- wrote (a transition table; PostgreSQL allows none on a trigger with a column list, so it fires
-- on every update of derivation_builds and picks the finished rows itself).
--
-- Without the old rows it cannot tell a status change from another update of a finished row: such
-- a row is sized again only while its size is still unknown (output_nar_size is null), and then a
-- size that became known since is recorded, which the row trigger would have missed.
drop trigger derivation_builds_output_nar_size on derivation_builds;
drop function record_output_nar_size();

create function record_output_nar_sizes() returns trigger language plpgsql as $$
begin
  update derivations d set output_nar_size = held.size
  from (
    select x.id, sum(s.nar_size) as size
    from (select distinct derivation_id from finished_rows where status in ('completed', 'substituted')) f
    join derivations x on x.id = f.derivation_id and x.output_nar_size is null
    cross join lateral jsonb_each_text(x.outputs) o(name, path)
    cross join lateral (
      select max(cp.nar_size) as nar_size from cached_paths cp
      where cp.hash_part = substring(o.path from '/([0-9a-df-np-sv-z]{32})-[^/]*$')
    ) s
    group by x.id
  ) held
  where d.id = held.id and held.size is not null;
  return null;
end $$;

create trigger derivation_builds_output_nar_size after update on derivation_builds
referencing new table as finished_rows
for each statement execute function record_output_nar_sizes();
