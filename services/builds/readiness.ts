// The readiness counter's start (migration 0042, docs/builds.md "The scheduler's data
// structures"): a new shared build counts its inputs whose builds are not completed or
// substituted. The status changes that move the counter afterwards are in buildStatus.ts.
import type { TransactionSql } from 'postgres';

/** This evaluation's builds rows, written by the same statement as the shared builds they point at. */
export interface EvaluationBuilds {
  evaluationId: string;
  /** derivations that had their shared build already (recorded before): their builds rows too */
  recordedBefore: readonly string[];
}

/**
 * Inserts the shared builds of these derivations (ids) that have none yet, each with its readiness
 * counter, and with `builds` the evaluation's builds rows for them and for the derivations recorded
 * before, in the same statement (one round trip and one pass fewer per recorded batch). The inputs'
 * builds are share-locked first, in a statement of their own: a completion running meanwhile either
 * committed before the count (and is not counted) or waits for this transaction, after which its
 * decrement finds the new row (in one statement the count would read a snapshot taken before the
 * lock was granted). An input whose build this very statement inserts counts as open.
 */
export async function insertDerivationBuilds(tx: TransactionSql, derivationIds: readonly string[], builds?: EvaluationBuilds): Promise<void> {
  if (derivationIds.length === 0 && (builds === undefined || builds.recordedBefore.length === 0)) return;
  const ids = derivationIds as string[];
  if (ids.length > 0) {
    await tx`
      select dep.id from derivation_edges x join derivation_builds dep on dep.derivation_id = x.depends_on
      where x.derivation_id = any(${ids}::uuid[]) order by dep.id for share of dep`;
  }
  // One grouped count for the whole batch: a correlated count per row walked the edges once per build.
  const insertShared = tx`
      insert into derivation_builds (derivation_id, inputs_remaining)
      select d.id, coalesce(open.n, 0) from unnest(${ids}::uuid[]) as d(id)
      left join (
        select x.derivation_id, count(*) as n from derivation_edges x left join derivation_builds dep on dep.derivation_id = x.depends_on
        where x.derivation_id = any(${ids}::uuid[]) and (dep.id is null or dep.status not in ('completed', 'substituted'))
        group by x.derivation_id) open on open.derivation_id = d.id
      on conflict (derivation_id) do nothing`;
  if (builds === undefined) {
    await insertShared;
    return;
  }
  // The builds rows take the new shared builds' ids from `returning` (the outer statement's
  // snapshot does not see the rows its own CTE wrote) and the earlier ones' from the table.
  await tx`
    with inserted as (${insertShared} returning id)
    insert into builds (evaluation_id, derivation_build_id)
    select ${builds.evaluationId}::uuid, id from inserted
    union all
    select ${builds.evaluationId}::uuid, id from derivation_builds where derivation_id = any(${builds.recordedBefore as string[]}::uuid[])
    on conflict do nothing`;
}
