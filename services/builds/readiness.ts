// The readiness counter's start (migration 0042, docs/builds.md "The scheduler's data
// structures"): a new shared build counts its inputs whose builds are not completed or
// substituted. The status changes that move the counter afterwards are in buildStatus.ts.
import type { TransactionSql } from 'postgres';

/**
 * Inserts the shared builds of these derivations (ids) that have none yet, each with its readiness
 * counter. The inputs' builds are share-locked first: a completion running meanwhile either
 * committed before the count (and is not counted) or waits for this transaction, after which its
 * decrement finds the new row. An input whose build this very statement inserts counts as open.
 */
export async function insertDerivationBuilds(tx: TransactionSql, derivationIds: readonly string[]): Promise<void> {
  if (derivationIds.length === 0) return;
  await tx`
    select dep.id from derivation_edges x join derivation_builds dep on dep.derivation_id = x.depends_on
    where x.derivation_id = any(${derivationIds as string[]}::uuid[]) order by dep.id for share of dep`;
  // One grouped count for the whole batch: a correlated count per row walked the edges once per build.
  await tx`
    insert into derivation_builds (derivation_id, inputs_remaining)
    select d.id, coalesce(open.n, 0) from unnest(${derivationIds as string[]}::uuid[]) as d(id)
    left join (
      select x.derivation_id, count(*) as n from derivation_edges x left join derivation_builds dep on dep.derivation_id = x.depends_on
      where x.derivation_id = any(${derivationIds as string[]}::uuid[]) and (dep.id is null or dep.status not in ('completed', 'substituted'))
      group by x.derivation_id) open on open.derivation_id = d.id
    on conflict (derivation_id) do nothing`;
}
