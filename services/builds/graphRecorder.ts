// Records an evaluation's derivation graph as its evalBatch messages arrive (docs/builds.md).
// A derivation is written once however many evaluations reach it, with one shared
// derivation_build; each evaluation gets its own builds rows pointing at the shared ones.
// Batches of one evaluation are recorded in order (the caller chains them), and derivations come
// after their inputs, so every edge's target already has a row.
//
// A batch is turned into COPY rows when it arrives (stageEvalBatch), so the decoded message is
// let go at once: a worker streams batches faster than they are recorded, and 500,000 decoded
// derivations waiting in line would not fit the server's memory (issue 23). A
// staged batch is flat strings: arrays of the decoded paths (a heap object per path) held about
// 1.6 times the memory of the same text joined, for as long as the batch waits in line. Recording COPYs the
// derivations into a staging table and merges them in one statement; the new derivations' edges are
// COPYed by id, and the shared builds and this evaluation's builds go in by one statement.
import type { TransactionSql } from 'postgres';
import { arrayLiteral, copyInto, copyRow, type Emit, type Events } from '../../storage/index.js';
import { applyStatusChanges } from './buildStatus.js';
import { forgetSpentAttempts, freshAttempts } from './attemptScopes.js';
import { formatAttributePath, type MessageOf } from '../../protocol/index.js';
import { insertCountedBuilds, lockInputBuilds, type NewDerivation } from './readiness.js';
import { insertGraphRows, type GraphRow } from './derivationNumbers.js';
import { markEntryPoints } from './entryPoints.js';

/** An evalBatch as COPY rows for the staging tables, and what else it says, small. */
export interface StagedEvalBatch {
  /** staged_derivations rows (copyRow lines), in the batch's order */
  derivationRows: string;
  /** the derivations' paths, in the batch's order, one a line */
  paths: string;
  /** the edges, two lines each: a derivation's path, then one input's */
  edges: string;
  /** drv path → attribute path; the last attribute naming a derivation wins */
  attributes: Map<string, string>;
  errors: { attr: string; message: string }[];
}

const STAGED_DERIVATION_COLUMNS = [
  'seq', 'drv_path', 'name', 'system', 'required_features', 'outputs', 'input_srcs', 'timeout_secs', 'max_silent_secs', 'prefer_local_build', 'fixed_output',
];

/** The batch as staging rows; nothing of the decoded message is kept. */
export function stageEvalBatch(batch: MessageOf<'evalBatch'>): StagedEvalBatch {
  const rows: string[] = [];
  const edges: string[] = [];
  batch.derivations.forEach((n, seq) => {
    rows.push(copyRow([
      seq, n.drvPath, n.name, n.system, arrayLiteral(n.requiredSystemFeatures), JSON.stringify(n.outputs), arrayLiteral(n.inputSrcs),
      n.timeoutSecs, n.maxSilentSecs, n.preferLocalBuild, n.fixedOutput,
    ]));
    for (const input of Object.keys(n.inputDrvs)) edges.push(n.drvPath, input);
  });
  return {
    // joined: one flat string each, and no path of the decoded message stays referenced
    derivationRows: rows.join(''), paths: batch.derivations.map((n) => n.drvPath).join('\n'), edges: edges.join('\n'),
    attributes: new Map(batch.attributes.map((a) => [a.drvPath, formatAttributePath(a.path)])),
    errors: batch.errors.map((e) => ({ attr: formatAttributePath(e.path), message: e.message.slice(0, 20000) })),
  };
}

/** Times a batch's transaction runs when PostgreSQL rolled it back for a deadlock or a serialization failure. */
const RECORD_ATTEMPTS = 3;

/** deadlock_detected, serialization_failure: nothing of the transaction was written, and it may run again. */
export const mayRunAgain = (error: unknown) =>
  typeof error === 'object' && error !== null && ['40P01', '40001'].includes(String((error as { code?: unknown }).code));

export async function recordEvalBatch(events: Events, evaluationId: string, batch: MessageOf<'evalBatch'> | StagedEvalBatch): Promise<{ derivations: number }> {
  const staged = 'derivationRows' in batch ? batch : stageEvalBatch(batch);
  for (let attempt = 1; ; attempt++) {
    try {
      return await recordStaged(events, evaluationId, staged);
    } catch (error) {
      // The recording's row locks are taken in one statement, in id order (readiness.ts), but its
      // re-queues and another transaction's completions may still meet in another order: the
      // rolled-back batch runs again, whole (the staged rows are kept; the events went with it).
      if (!mayRunAgain(error) || attempt >= RECORD_ATTEMPTS) throw error;
    }
  }
}

async function recordStaged(events: Events, evaluationId: string, staged: StagedEvalBatch): Promise<{ derivations: number }> {
  // paths never hold a newline (a store path's characters are checked when the message is decoded)
  const paths = lines(staged.paths);
  const edges = lines(staged.edges);
  // Statements that do not need an earlier one's answer go out together, behind the COPY they
  // follow (pipelined on the transaction's connection, `begin` with the first): a batch is about
  // six round trips, each of which waits for this process's event loop, which decodes the next
  // batches meanwhile. PostgreSQL still runs them one by one, in order, each with its own snapshot.
  return events.transaction(async (tx, emit) => {
    const ids = new Map<string, string>();
    // derivation id → its number (derivationNumbers.ts), for the new derivations' graph rows
    const nums = new Map<string, string>();
    if (paths.length > 0) {
      // The batch's derivations (recorded before, by an earlier evaluation or by another recording
      // meanwhile, or just now by the merge) and the inputs from earlier batches, found by path in
      // one query after the merge; from here on rows are addressed by id, never joined by path again.
      const [inserted] = await stage(tx, staged, () => {
        const merged = mergeDerivations(tx).execute();
        return Promise.all([merged, lookUp(tx, ids, [...new Set([...paths, ...edges])], nums)]);
      });
      const insertedSet = new Set(inserted.map((r) => r.id));
      const recordedBefore = [...new Set(ids.values())].filter((id) => !insertedSet.has(id));
      const { rows, derivations } = newEdges(edges, ids, insertedSet, inserted);
      // The new derivations' edges, then their graph rows and the share lock of their inputs' builds (readiness.ts)
      const status = await copyInto(tx, 'derivation_edges', EDGE_COLUMNS, rows, async () => {
        const numbered = derivations.length > 0 ? insertGraphRows(tx, graphRows(derivations, nums)).execute() : undefined;
        const [, locked] = await Promise.all([numbered, lockInputBuilds(tx, [...new Set(derivations.flatMap((d) => d.inputs))])]);
        return locked;
      });
      // the shared builds of the new derivations and this evaluation's builds of all the batch's, in
      // one statement; then the finished builds reached again. After the insert, so the re-queues'
      // events reach this evaluation's builds too, and an abort that checks for open evaluations
      // afterwards sees this one. A derivation new to this batch has a new queued build: only the
      // ones recorded before can be finished.
      const batchRecordedBefore = [...new Set(paths.map((p) => ids.get(p)!))].filter((id) => !insertedSet.has(id));
      const [, finished] = await Promise.all([
        insertCountedBuilds(tx, derivations, status, { evaluationId, recordedBefore: batchRecordedBefore }),
        finishedBuilds(tx, evaluationId, recordedBefore),
      ]);
      await requeueReachedBuilds(tx, emit, finished);
    }
    if (staged.attributes.size > 0) {
      await lookUp(tx, ids, [...staged.attributes.keys()]);
      const attrs = [...staged.attributes].flatMap(([path, attr]) => (ids.has(path) ? [[ids.get(path)!, attr] as const] : []));
      await markEntryPoints(tx, evaluationId, attrs);
    }
    if (staged.errors.length > 0) {
      await tx`
        insert into evaluation_attribute_errors (evaluation_id, attr, message)
        select ${evaluationId}, attr, message
        from unnest(${staged.errors.map((e) => e.attr)}::text[], ${staged.errors.map((e) => e.message)}::text[]) as x(attr, message)
        on conflict do nothing`;
    }
    return { derivations: paths.length };
  }, { pipelined: true });
}

const lines = (text: string): string[] => (text === '' ? [] : text.split('\n'));

/** Adds the ids of those of `wanted` not in `ids` yet that have a row (and their numbers to `nums`); the ids it found. */
async function lookUp(tx: TransactionSql, ids: Map<string, string>, wanted: readonly string[], nums?: Map<string, string>): Promise<string[]> {
  const missing = wanted.filter((p) => !ids.has(p));
  if (missing.length === 0) return [];
  // one probe of the drv_path index a path (`offset 0` keeps the lateral), whatever the statistics
  const rows = await tx<{ id: string; drv_path: string; num: string }[]>`
    select d.id, d.drv_path, d.num from unnest(${missing}::text[]) p(path)
    cross join lateral (select id, drv_path, num from derivations where drv_path = p.path offset 0) d`;
  for (const r of rows) {
    ids.set(r.drv_path, r.id);
    nums?.set(r.id, r.num);
  }
  return rows.map((r) => r.id);
}

/** The graph rows of the derivations this batch wrote: every number was found with its id (lookUp). */
const graphRows = (derivations: readonly NewDerivation[], nums: ReadonlyMap<string, string>): GraphRow[] =>
  derivations.map((d) => ({ num: nums.get(d.id)!, id: d.id, deps: d.inputs.map((i) => nums.get(i)!) }));

/**
 * The batch's derivations into this transaction's staging table (temporary, emptied at commit, made
 * once per connection), by COPY; `next`'s statements go out behind the COPY's end.
 */
function stage<T>(tx: TransactionSql, staged: StagedEvalBatch, next: () => Promise<T>): Promise<T> {
  void tx.unsafe(`
    create temp table if not exists staged_derivations (
      seq int not null, drv_path text not null, name text not null, system text not null, required_features text[] not null,
      outputs jsonb not null, input_srcs text[] not null, timeout_secs int, max_silent_secs int, prefer_local_build boolean not null,
      fixed_output boolean not null) on commit delete rows`).simple().execute().catch(() => undefined);
  // a failed create fails the COPY after it (the transaction is aborted)
  return copyInto(tx, 'staged_derivations', STAGED_DERIVATION_COLUMNS, staged.derivationRows, next);
}

/**
 * The staged derivations no evaluation recorded yet, in one statement; the rows it wrote (a row
 * recorded before, or by another recording meanwhile, is skipped, with its edges and build). The
 * unique index on drv_path finds them, one probe a staged row, which the insert makes anyway: an
 * anti-join with derivations was planned as a hash of the whole table for every batch (the
 * statistics of a graph being recorded say it is small), 10-80 ms a batch at 50,000 derivations.
 */
function mergeDerivations(tx: TransactionSql) {
  return tx<{ id: string; drv_path: string }[]>`
    insert into derivations (drv_path, name, system, required_features, outputs, input_srcs, timeout_secs, max_silent_secs, prefer_local_build, fixed_output)
    select s.drv_path, s.name, s.system, s.required_features, s.outputs, s.input_srcs, s.timeout_secs, s.max_silent_secs, s.prefer_local_build, s.fixed_output
    from staged_derivations s order by s.seq
    on conflict (drv_path) do nothing returning id, drv_path`;
}

/**
 * The edges of derivations this batch wrote (one written before has its own), by id, as COPY rows
 * for derivation_edges, and those derivations with their inputs (readiness.ts); an input with no
 * row is left out. No staging table and no `on conflict` are needed: only this transaction can
 * have edges from derivations it has just inserted, and a derivation listed twice in the batch
 * gives its edges once here. The foreign keys are still checked per row, and a refused COPY fails
 * the whole batch's transaction.
 */
function newEdges(edges: readonly string[], ids: ReadonlyMap<string, string>, inserted: ReadonlySet<string>, order: readonly { id: string }[]): { rows: string; derivations: NewDerivation[] } {
  const inputs = new Map<string, Set<string>>(order.map((r) => [r.id, new Set()]));
  let rows = '';
  for (let i = 0; i < edges.length; i += 2) {
    const derivationId = ids.get(edges[i]!)!;
    const inputId = ids.get(edges[i + 1]!);
    if (!inserted.has(derivationId) || inputId === undefined) continue;
    const seen = inputs.get(derivationId)!;
    if (seen.has(inputId)) continue;
    seen.add(inputId);
    // ids are uuids PostgreSQL gave: no character COPY would need escaped
    rows += `${derivationId}\t${inputId}\n`;
  }
  return { rows, derivations: [...inputs].map(([id, set]) => ({ id, inputs: [...set] })) };
}

const EDGE_COLUMNS = ['derivation_id', 'depends_on'];

type FinishedBuild = { id: string; status: string; outputs_cached: boolean };

/**
 * Finished builds of these derivations (recorded by earlier evaluations) that are wanted again,
 * found in one query; requeueReachedBuilds sends them back to the queue (buildStatus.ts).
 */
async function finishedBuilds(tx: TransactionSql, evaluationId: string, derivationIds: readonly string[]): Promise<FinishedBuild[]> {
  if (derivationIds.length === 0) return [];
  // A build whose outcome stands for another organization only (tenantScope.ts) is not re-queued
  // here: the evaluation claims it when it starts building (tenantClaims.ts), so one still
  // evaluating never holds it.
  return tx<FinishedBuild[]>`
    select id, status, outputs_cached from derivation_builds
    where derivation_id = any(${derivationIds as string[]}::uuid[])
      and (status = 'aborted' or (status in ('completed', 'substituted') and not outputs_cached)
           or (status = 'failed' and (select retry_failed from evaluations where id = ${evaluationId})))
    order by id`;
}

async function requeueReachedBuilds(tx: TransactionSql, emit: Emit, finished: readonly FinishedBuild[]): Promise<void> {
  if (finished.length === 0) return;
  const having = (test: (b: FinishedBuild) => boolean) => finished.filter(test).map((b) => b.id);
  // A finished build whose output was deleted from the last cache holding it (evictedOutputs.ts):
  // substituted if a cache got the path back meanwhile, built otherwise.
  const requeued = await applyStatusChanges(tx, emit, having((b) => b.status === 'completed' || b.status === 'substituted'), { event: { type: 'requeue', why: 'evicted' } });
  if (requeued.length > 0) await tx`update derivation_builds set outputs_cached = true where id = any(${requeued}::uuid[])`;
  // A build cancelled when another evaluation was aborted (buildAborts.ts).
  const reached = await applyStatusChanges(tx, emit, having((b) => b.status === 'aborted'), { event: { type: 'requeue', why: 'reached_again' } });
  // Neither failed: each starts over with all of its attempts (attemptScopes.ts).
  await forgetSpentAttempts(tx, [...requeued, ...reached]);
  // A restarted evaluation (evaluations.ts) tries its failed builds again, with fresh attempts.
  const retried = await applyStatusChanges(tx, emit, having((b) => b.status === 'failed'), { event: { type: 'requeue', why: 'restarted' } });
  await freshAttempts(tx, retried);
}
