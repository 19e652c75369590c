// Records an evaluation's derivation graph as its evalBatch messages arrive (docs/builds.md).
// A derivation is written once however many evaluations reach it, with one shared
// derivation_build; each evaluation gets its own builds rows pointing at the shared ones.
// Batches of one evaluation are recorded in order (the caller chains them), and derivations come
// after their inputs, so every edge's target already has a row.
//
// A batch is turned into COPY rows when it arrives (stageEvalBatch), so the decoded message is
// let go at once: a worker streams batches faster than they are recorded, and 500,000 decoded
// derivations waiting in line would not fit the server's memory (issue 23). Recording COPYs the
// rows into staging tables and merges them with a statement per table, found by path in the
// database rather than by parameters.
import type { TransactionSql } from 'postgres';
import { arrayLiteral, copyInto, copyRow, type Emit, type Events } from '../../storage/index.js';
import { applyStatusChanges } from './buildStatus.js';
import { formatAttributePath, type MessageOf } from '../../protocol/index.js';
import { insertDerivationBuilds } from './readiness.js';

/** An evalBatch as COPY rows for the staging tables, and what else it says, small. */
export interface StagedEvalBatch {
  /** staged_derivations rows (copyRow lines), in the batch's order */
  derivationRows: string;
  /** staged_edges rows: a derivation's path and one input's */
  edgeRows: string;
  derivations: number;
  /** drv path → attribute path; the last attribute naming a derivation wins */
  attributes: Map<string, string>;
  errors: { attr: string; message: string }[];
}

const STAGED_DERIVATION_COLUMNS = [
  'seq', 'drv_path', 'name', 'system', 'required_features', 'outputs', 'input_srcs', 'timeout_secs', 'max_silent_secs', 'prefer_local_build', 'fixed_output',
];

/** The batch as staging rows; nothing of the decoded message is kept. */
export function stageEvalBatch(batch: MessageOf<'evalBatch'>): StagedEvalBatch {
  let derivationRows = '';
  let edgeRows = '';
  batch.derivations.forEach((n, seq) => {
    derivationRows += copyRow([
      seq, n.drvPath, n.name, n.system, arrayLiteral(n.requiredSystemFeatures), JSON.stringify(n.outputs), arrayLiteral(n.inputSrcs),
      n.timeoutSecs, n.maxSilentSecs, n.preferLocalBuild, n.fixedOutput,
    ]);
    for (const input of Object.keys(n.inputDrvs)) edgeRows += copyRow([n.drvPath, input]);
  });
  return {
    derivationRows, edgeRows, derivations: batch.derivations.length,
    attributes: new Map(batch.attributes.map((a) => [a.drvPath, formatAttributePath(a.path)])),
    errors: batch.errors.map((e) => ({ attr: formatAttributePath(e.path), message: e.message.slice(0, 20000) })),
  };
}

export async function recordEvalBatch(events: Events, evaluationId: string, batch: MessageOf<'evalBatch'> | StagedEvalBatch): Promise<{ derivations: number }> {
  const staged = 'derivationRows' in batch ? batch : stageEvalBatch(batch);
  return events.transaction(async (tx, emit) => {
    if (staged.derivations > 0) {
      await stage(tx, staged);
      const inserted = await mergeDerivations(tx);
      await insertEdges(tx, inserted);
      await insertDerivationBuilds(tx, inserted);
      await tx`
        insert into builds (evaluation_id, derivation_build_id)
        select ${evaluationId}, db.id from staged_derivations s join derivations d on d.drv_path = s.drv_path
        join derivation_builds db on db.derivation_id = d.id
        on conflict do nothing`;
      // After the insert above, so the re-queues' events reach this evaluation's builds too, and an
      // abort that checks for open evaluations afterwards sees this one. A derivation new to this
      // batch has a new queued build: only the ones recorded before can be finished.
      await requeueReachedBuilds(tx, emit, evaluationId);
    }
    if (staged.attributes.size > 0) {
      await tx`
        update builds b set entry_point = true, attr = a.attr
        from unnest(${[...staged.attributes.keys()]}::text[], ${[...staged.attributes.values()]}::text[]) as a(drv_path, attr)
        join derivations d on d.drv_path = a.drv_path join derivation_builds db on db.derivation_id = d.id
        where b.derivation_build_id = db.id and b.evaluation_id = ${evaluationId}`;
    }
    if (staged.errors.length > 0) {
      await tx`
        insert into evaluation_attribute_errors (evaluation_id, attr, message)
        select ${evaluationId}, attr, message
        from unnest(${staged.errors.map((e) => e.attr)}::text[], ${staged.errors.map((e) => e.message)}::text[]) as x(attr, message)
        on conflict do nothing`;
    }
    return { derivations: staged.derivations };
  });
}

/**
 * The batch's rows into this transaction's staging tables (temporary, emptied at commit, made
 * once per connection), by COPY.
 */
async function stage(tx: TransactionSql, staged: StagedEvalBatch): Promise<void> {
  await tx.unsafe(`
    create temp table if not exists staged_derivations (
      seq int not null, drv_path text not null, name text not null, system text not null, required_features text[] not null,
      outputs jsonb not null, input_srcs text[] not null, timeout_secs int, max_silent_secs int, prefer_local_build boolean not null,
      fixed_output boolean not null) on commit delete rows;
    create temp table if not exists staged_edges (drv_path text not null, input_path text not null) on commit delete rows`).simple();
  await copyInto(tx, 'staged_derivations', STAGED_DERIVATION_COLUMNS, staged.derivationRows);
  await copyInto(tx, 'staged_edges', ['drv_path', 'input_path'], staged.edgeRows);
  // Temporary tables have no statistics until analyzed: without them the planner guessed their
  // size and scanned all of derivations for the joins by path (a cost growing with every batch).
  await tx.unsafe('analyze staged_derivations, staged_edges').simple();
}

/**
 * The staged derivations no evaluation recorded yet, in one statement; the ids of the rows it
 * wrote (a row another recording wrote meanwhile is skipped, with its edges and build).
 */
async function mergeDerivations(tx: TransactionSql): Promise<string[]> {
  const rows = await tx<{ id: string }[]>`
    insert into derivations (drv_path, name, system, required_features, outputs, input_srcs, timeout_secs, max_silent_secs, prefer_local_build, fixed_output)
    select s.drv_path, s.name, s.system, s.required_features, s.outputs, s.input_srcs, s.timeout_secs, s.max_silent_secs, s.prefer_local_build, s.fixed_output
    from staged_derivations s where not exists (select 1 from derivations d where d.drv_path = s.drv_path) order by s.seq
    on conflict (drv_path) do nothing returning id`;
  return rows.map((r) => r.id);
}

/** The edges of derivations this batch wrote (one written before has its own); an input with no row is left out. */
async function insertEdges(tx: TransactionSql, inserted: readonly string[]): Promise<void> {
  if (inserted.length === 0) return;
  await tx`
    insert into derivation_edges (derivation_id, depends_on, outputs)
    select d.id, i.id, '{}' from staged_edges e join derivations d on d.drv_path = e.drv_path join derivations i on i.drv_path = e.input_path
    where d.id = any(${inserted as string[]}::uuid[])
    on conflict do nothing`;
}

/**
 * Finished builds of the staged derivations (recorded by earlier evaluations; a new one is queued)
 * that are wanted again go back to the queue (buildStatus.ts), found in one query.
 */
async function requeueReachedBuilds(tx: TransactionSql, emit: Emit, evaluationId: string): Promise<void> {
  const finished = await tx<{ id: string; status: string; outputs_cached: boolean }[]>`
    select distinct db.id, db.status, db.outputs_cached from staged_derivations s join derivations d on d.drv_path = s.drv_path
    join derivation_builds db on db.derivation_id = d.id
    where db.status = 'aborted' or (db.status in ('completed', 'substituted') and not db.outputs_cached)
      or (db.status = 'failed' and (select retry_failed from evaluations where id = ${evaluationId}))`;
  const having = (test: (b: (typeof finished)[number]) => boolean) => finished.filter(test).map((b) => b.id);
  // A finished build whose output was deleted from the last cache holding it (evictedOutputs.ts):
  // substituted if a cache got the path back meanwhile, built otherwise.
  const requeued = await applyStatusChanges(tx, emit, having((b) => b.status === 'completed' || b.status === 'substituted'), { event: { type: 'requeue', why: 'evicted' } });
  if (requeued.length > 0) await tx`update derivation_builds set outputs_cached = true where id = any(${requeued}::uuid[])`;
  // A build cancelled when another evaluation was aborted (buildAborts.ts).
  await applyStatusChanges(tx, emit, having((b) => b.status === 'aborted'), { event: { type: 'requeue', why: 'reached_again' } });
  // A restarted evaluation (evaluations.ts) tries its failed builds again, with fresh attempts.
  const retried = await applyStatusChanges(tx, emit, having((b) => b.status === 'failed'), { event: { type: 'requeue', why: 'restarted' } });
  if (retried.length > 0) await tx`update derivation_builds set attempts = 0 where id = any(${retried}::uuid[])`;
}
