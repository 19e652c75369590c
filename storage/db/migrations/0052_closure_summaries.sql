-- Precomputed closure views (issue 23 item 3, docs/builds.md "Graph, closures and products").
--
-- 1. Each derivation's recorded output size: the NAR sizes of its outputs when its build became
--    completed or substituted (outputs are in a cache by then), whichever cache held them. Written
--    once by the trigger below, so every path that finishes a build records it, in the transaction
--    of the status change; never changed afterwards (a rebuilt path has the same size in practice).
--    A closure view ranks and totals by these, so it never looks every node up among cached paths.
alter table derivations add column output_nar_size bigint;

create function record_output_nar_size() returns trigger language plpgsql as $$
begin
  update derivations d set output_nar_size = held.size
  from (
    select sum(s.nar_size) as size from derivations x
    cross join lateral jsonb_each_text(x.outputs) o(name, path)
    cross join lateral (
      select max(cp.nar_size) as nar_size from cached_paths cp
      where cp.hash_part = substring(o.path from '/([0-9a-df-np-sv-z]{32})-[^/]*$')
    ) s
    where x.id = new.derivation_id
  ) held
  where d.id = new.derivation_id and d.output_nar_size is null and held.size is not null;
  return null;
end $$;

create trigger derivation_builds_output_nar_size after update of status on derivation_builds
for each row when (new.status in ('completed', 'substituted') and old.status is distinct from new.status)
execute function record_output_nar_size();

-- What was built before this migration: the sizes the caches hold now.
update derivations d set output_nar_size = held.size
from (
  select x.id, sum(s.nar_size) as size from derivation_builds db join derivations x on x.id = db.derivation_id
  cross join lateral jsonb_each_text(x.outputs) o(name, path)
  cross join lateral (
    select max(cp.nar_size) as nar_size from cached_paths cp
    where cp.hash_part = substring(o.path from '/([0-9a-df-np-sv-z]{32})-[^/]*$')
  ) s
  where db.status in ('completed', 'substituted')
  group by x.id
) held
where d.id = held.id and held.size is not null;

-- 2. A build-time closure view as it was last computed: one row per root derivation (a build's
--    view; the same in every evaluation that reaches it) or per evaluation (its entry points). A
--    derivation's closure never changes, only the recorded sizes inside it, and those only go from
--    unknown to known: a row is current while the closure still has node_count nodes of which
--    sized_count have a size adding up to total_size (one walk of the closure checks it).
create table closure_summaries (
  derivation_id uuid references derivations on delete cascade,
  evaluation_id uuid references evaluations on delete cascade,
  check ((derivation_id is null) <> (evaluation_id is null)),
  root_count integer not null,
  node_count integer not null,
  edge_count integer not null,
  sized_count integer not null,
  total_size bigint not null,
  -- the shown nodes (at most 500), largest accumulated closure first, and those sizes
  node_ids uuid[] not null,
  closure_sizes bigint[] not null,
  -- the edges between shown nodes, as positions in node_ids (target depends on source)
  edge_sources integer[] not null,
  edge_targets integer[] not null,
  computed_at timestamptz not null default now()
);
create unique index closure_summaries_derivation on closure_summaries (derivation_id) where derivation_id is not null;
create unique index closure_summaries_evaluation on closure_summaries (evaluation_id) where evaluation_id is not null;
