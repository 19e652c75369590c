// An evaluation's entry points (its attributes) marked on its builds rows (graphRecorder.ts).
import type { TransactionSql } from 'postgres';

/**
 * Marks this evaluation's builds of these derivations (ids) as entry points with their attribute
 * paths, in one statement. Each row is found by index with both keys of builds'
 * (evaluation_id, derivation_build_id): the derivation's shared build by a scalar subquery, so
 * the builds probe holds both as index conditions whatever the statistics. As a join of the two
 * inside the lateral, the planner probed builds by evaluation_id alone whenever the statistics
 * did not know the evaluation (any evaluation recorded after the last analyze: estimated one row)
 * and then filtered every build of the evaluation for each attribute: 49 s a batch of ~2,250
 * attributes when a second 50,000-derivation graph was recorded (bench/README.md, eval-record).
 * The rows updated are found by their ids in an array the planner takes for a few: as a join, it
 * hashed all of derivation_builds and this evaluation's builds for every attribute batch.
 */
export async function markEntryPoints(tx: TransactionSql, evaluationId: string, attrs: readonly (readonly [derivationId: string, attr: string])[]): Promise<void> {
  if (attrs.length === 0) return;
  await tx`
    with entry as materialized (
      select x.id, a.attr from unnest(${attrs.map((a) => a[0])}::uuid[], ${attrs.map((a) => a[1])}::text[]) as a(derivation_id, attr)
      cross join lateral (
        select b.id from builds b
        where b.evaluation_id = ${evaluationId}
          and b.derivation_build_id = (select db.id from derivation_builds db where db.derivation_id = a.derivation_id)
        offset 0) x)
    update builds b set entry_point = true, attr = entry.attr from entry
    where b.id = any(array(select id from entry)) and b.id = entry.id`;
}
