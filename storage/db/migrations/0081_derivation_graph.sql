-- The derivation graph numbered (issue 23 item 3, docs/builds.md "How the build-time view is
-- computed"): a cold closure view walked derivation_edges by uuid, then read the edges again and
-- numbered their targets by a hash join, ~190 ms of CPU at 50,000 derivations on top of the walk.
--
-- 1. Each derivation's number: an integer of the server's own, never shown to anyone (ids stay
--    uuids in every answer). Numbers are never reused: a collected derivation's is gone for good.
--    The merge of a recording takes one for every staged row, including the ones it skips as
--    recorded before, hence bigint.
create sequence derivation_num_seq as bigint;
alter table derivations add column num bigint not null default nextval('derivation_num_seq');
alter sequence derivation_num_seq owned by derivations.num;

-- 2. One row per derivation with its inputs' numbers and its recorded output size: the closure
--    walk reads one row per node and returns numbers, with nothing joined. Written with the
--    derivation's edges (graphRecorder.ts, directBuilds.ts), never changed after but for the size.
--    No foreign key (its check per row would cost the recording); the delete trigger below
--    removes a deleted derivation's row, and a walk that reaches a number without a row reads the
--    closure from derivation_edges instead.
create table derivation_graph (
  num bigint primary key,
  derivation_id uuid not null,
  deps bigint[] not null,
  -- derivations.output_nar_size, written by the same trigger statement
  output_nar_size bigint
);

insert into derivation_graph (num, derivation_id, deps, output_nar_size)
select d.num, d.id, coalesce(x.deps, '{}'), d.output_nar_size
from derivations d
left join (
  select e.derivation_id, array_agg(i.num) as deps from derivation_edges e join derivations i on i.id = e.depends_on group by e.derivation_id
) x on x.derivation_id = d.id;

create function forget_derivation_graph() returns trigger language plpgsql as $$
begin
  delete from derivation_graph g using gone_derivations o where g.num = o.num;
  return null;
end $$;

create trigger derivations_forget_graph after delete on derivations
referencing old table as gone_derivations
for each statement execute function forget_derivation_graph();

-- 3. The recorded output size (0052, 0077, 0080) goes to both rows in one statement.
create or replace function record_output_nar_sizes() returns trigger language plpgsql as $$
begin
  with held as (
    select x.id, sum(s.nar_size) as size
    from (select distinct derivation_id from finished_rows where status in ('completed', 'substituted')) f
    join derivations x on x.id = f.derivation_id and x.output_nar_size is null
    cross join lateral jsonb_each_text(x.outputs) o(name, path)
    cross join lateral (
      select max(cp.nar_size) as nar_size from cached_paths cp where cp.hash_part = kiln_store_hash_part(o.path)
    ) s
    group by x.id
  ), sized as (
    update derivations d set output_nar_size = held.size from held
    where d.id = held.id and held.size is not null
    returning d.num, d.output_nar_size
  )
  update derivation_graph g set output_nar_size = sized.output_nar_size from sized where g.num = sized.num;
  return null;
end $$;
