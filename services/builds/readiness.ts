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
  await tx`
    insert into derivation_builds (derivation_id, inputs_remaining)
    select d.id, (
      select count(*) from derivation_edges x left join derivation_builds dep on dep.derivation_id = x.depends_on
      where x.derivation_id = d.id and (dep.id is null or dep.status not in ('completed', 'substituted')))
    from derivations d where d.id = any(${derivationIds as string[]}::uuid[])
    on conflict (derivation_id) do nothing`;
}
