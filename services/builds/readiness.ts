// The readiness counter's start (migration 0042, docs/builds.md "The scheduler's data
// structures"): a new shared build counts its inputs whose builds are not completed or
// substituted. The status changes that move the counter afterwards are in buildStatus.ts.
import type { TransactionSql } from 'postgres';
import type { BuildStatus } from '../../protocol/index.js';

/** The statuses that count as an input being there: its dependents' inputs_remaining leaves them out (buildStatus.ts moves the counters by it). */
export const DONE: ReadonlySet<string> = new Set<BuildStatus>(['completed', 'substituted']);

/** This evaluation's builds rows, written by the same statement as the shared builds they point at. */
export interface EvaluationBuilds {
  evaluationId: string;
  /** derivations that had their shared build already (recorded before): their builds rows too */
  recordedBefore: readonly string[];
}

/**
 * Inserts the shared builds of these derivations (ids) that have none yet, each with its readiness
 * counter (an evaluation's recording uses lockInputBuilds and insertCountedBuilds below). The inputs'
 * builds are share-locked first, in a statement of their own: a completion running meanwhile either
 * committed before the count (and is not counted) or waits for this transaction, after which its
 * decrement finds the new row (in one statement the count would read a snapshot taken before the
 * lock was granted). An input whose build this very statement inserts counts as open.
 */
export async function insertDerivationBuilds(tx: TransactionSql, derivationIds: readonly string[]): Promise<void> {
  if (derivationIds.length === 0) return;
  const ids = derivationIds as string[];
  // Index probes whatever the statistics (docs/builds.md, "Plans while a graph is being
  // recorded"): the inputs by each derivation's edges (`offset 0` keeps the lateral per
  // derivation, so it is not turned into a join that reads the whole edges table), their builds
  // by an array the planner takes for a few rows. As a join, a just-recorded graph's stale
  // statistics hashed all of derivation_builds for every batch (35-47 ms at 50,000 derivations;
  // 4 ms this way).
  await tx`
    select dep.id from derivation_builds dep
    where dep.derivation_id = any(array(
      select x.depends_on from unnest(${ids}::uuid[]) d(id)
      cross join lateral (select x.depends_on from derivation_edges x where x.derivation_id = d.id offset 0) x))
    order by dep.id for share of dep`;
  // Each new build counts its open inputs by index: its edges by the edges' key, each input's
  // build by derivation_id (subqueries, which the planner does not turn into joins). A grouped
  // count joined to derivation_builds was planned from the statistics, and on a graph still being
  // recorded they describe tables a fraction of their size: it hashed all of derivation_builds for
  // every batch, 18-70 ms a batch at 50,000 derivations against 5-6 ms so, and growing with the table.
  await tx`
    insert into derivation_builds (derivation_id, inputs_remaining, ready)
    select n.id, n.open, n.open = 0 from (select d.id, (
      select count(*) from derivation_edges x where x.derivation_id = d.id
        and coalesce((select dep.status from derivation_builds dep where dep.derivation_id = x.depends_on), 'none') not in ('completed', 'substituted')) as open
    from unnest(${ids}::uuid[]) as d(id) offset 0) n
    on conflict (derivation_id) do nothing`;
}

/** A new derivation of a recorded batch and the inputs its edges name (ids). */
export interface NewDerivation {
  id: string;
  inputs: readonly string[];
}

/**
 * The recording's form of insertDerivationBuilds, in two statements (graphRecorder.ts): this one
 * share-locks the inputs' builds and reads their statuses, and insertCountedBuilds then gives each
 * new build the counter counted from them, so the insert counts nothing (a subquery per derivation
 * and per edge was a third of the recording's time). A locked row's status cannot change until this
 * transaction ends, and the lock returns its newest version: a completion that committed before it
 * is seen as done, one that comes later waits and then finds the new row.
 */
export async function lockInputBuilds(tx: TransactionSql, inputs: readonly string[]): Promise<Map<string, string>> {
  const status = new Map<string, string>();
  if (inputs.length === 0) return status;
  // in id order, as every lock of derivation_builds (buildStatus.ts); the array as a subquery,
  // which the planner takes for a few rows, so it probes the index whatever the statistics
  const locked = await tx<{ derivation_id: string; status: string }[]>`
    select dep.derivation_id, dep.status from derivation_builds dep
    where dep.derivation_id = any(array(select unnest(${inputs as string[]}::uuid[])))
    order by dep.id for share of dep`;
  for (const row of locked) status.set(row.derivation_id, row.status);
  return status;
}

/**
 * The shared builds of `derivations` with their counters (`status`: lockInputBuilds' answer; an
 * input with no build, one this statement inserts, counts as open, as in insertDerivationBuilds),
 * and the evaluation's builds rows, in one statement.
 */
export async function insertCountedBuilds(tx: TransactionSql, derivations: readonly NewDerivation[], status: ReadonlyMap<string, string>, builds: EvaluationBuilds): Promise<void> {
  if (derivations.length === 0 && builds.recordedBefore.length === 0) return;
  const open = (input: string) => !DONE.has(status.get(input) ?? 'none');
  const counts = derivations.map((d) => d.inputs.filter(open).length);
  // The builds rows take the new shared builds' ids from `returning` (the outer statement's
  // snapshot does not see the rows its own CTE wrote) and the earlier ones' from the table.
  await tx`
    with inserted as (
      insert into derivation_builds (derivation_id, inputs_remaining, ready)
      select *, n = 0 from unnest(${derivations.map((d) => d.id)}::uuid[], ${counts}::int[]) as c(id, n)
      on conflict (derivation_id) do nothing returning id)
    insert into builds (evaluation_id, derivation_build_id)
    select ${builds.evaluationId}::uuid, id from inserted
    union all
    select ${builds.evaluationId}::uuid, db.id from unnest(${builds.recordedBefore as string[]}::uuid[]) r(id)
    cross join lateral (select db.id from derivation_builds db where db.derivation_id = r.id offset 0) db
    on conflict do nothing`;
}
