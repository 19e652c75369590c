-- The readiness counter (issue 23 item 1, docs/builds.md "The scheduler's data structures"): per
-- shared build, how many of its inputs' builds are not completed or substituted. Written when the
-- build is recorded and moved by one update of the dependents in the transaction of every status
-- change that enters or leaves {completed, substituted} (services/builds/buildStatus.ts), so the
-- scheduler finds ready builds through the index below instead of an anti-join over every edge.
alter table derivation_builds add column inputs_remaining integer not null default 0;

update derivation_builds db set inputs_remaining = open.n
from (
  select me.id, count(*)::int as n from derivation_builds me
  join derivation_edges x on x.derivation_id = me.derivation_id
  join derivation_builds dep on dep.derivation_id = x.depends_on
  where dep.status not in ('completed', 'substituted')
  group by me.id) open
where db.id = open.id;

create index derivation_builds_ready on derivation_builds (queued_at) where status = 'queued' and inputs_remaining = 0;
