// Records an evaluation's derivation graph as its evalBatch messages arrive (docs/builds.md).
// A derivation is written once however many evaluations reach it, with one shared
// derivation_build; each evaluation gets its own builds rows pointing at the shared ones.
// Batches of one evaluation are recorded in order (the caller chains them), and derivations come
// after their inputs, so every edge's target already has a row.
import type { TransactionSql } from 'postgres';
import type { Emit, Events } from '../../storage/index.js';
import { applyStatusChanges } from './buildStatus.js';
import { formatAttributePath, type MessageOf } from '../../protocol/index.js';
import { insertDerivationBuilds } from './readiness.js';

export async function recordEvalBatch(events: Events, evaluationId: string, batch: MessageOf<'evalBatch'>): Promise<{ derivations: number }> {
  return events.transaction(async (tx, emit) => {
    const nodes = batch.derivations;
    const paths = nodes.map((n) => n.drvPath);
    // Derivations shared with earlier evaluations, and the inputs and attributes' derivations from earlier batches, found by
    // their paths in one query; from here on rows are addressed by id, never joined by path again.
    const ids = new Map<string, string>();
    const lookUp = async (wanted: readonly string[]) => {
      if (wanted.length === 0) return;
      for (const r of await tx<{ id: string; drv_path: string }[]>`select id, drv_path from derivations where drv_path = any(${wanted as string[]})`) ids.set(r.drv_path, r.id);
    };
    await lookUp([...new Set([...paths, ...nodes.flatMap((n) => Object.keys(n.inputDrvs)), ...batch.attributes.map((a) => a.drvPath)])]);
    const recordedBefore = [...new Set(paths.filter((p) => ids.has(p)).map((p) => ids.get(p)!))];
    const inserted = await insertDerivations(tx, nodes.filter((n) => !ids.has(n.drvPath)));
    for (const [path, id] of inserted) ids.set(path, id);
    // Another evaluation's recording wrote these meanwhile, with their edges and builds.
    await lookUp(paths.filter((p) => !ids.has(p)));
    await insertEdges(tx, nodes.filter((n) => inserted.has(n.drvPath)), ids);
    await insertDerivationBuilds(tx, [...inserted.values()]);
    const derivationIds = [...new Set(paths.map((p) => ids.get(p)!))];
    if (derivationIds.length > 0) {
      await tx`
        insert into builds (evaluation_id, derivation_build_id)
        select ${evaluationId}, id from derivation_builds where derivation_id = any(${derivationIds}::uuid[])
        on conflict do nothing`;
      // After the insert above, so the re-queues' events reach this evaluation's builds too, and an
      // abort that checks for open evaluations afterwards sees this one. A derivation new to this
      // batch has a new queued build: only the ones recorded before can be finished.
      await requeueReachedBuilds(tx, emit, evaluationId, recordedBefore);
    }
    // The last attribute naming a derivation wins, as it did when each one was its own update.
    const attrs = new Map(batch.attributes.flatMap((a) => {
      const id = ids.get(a.drvPath);
      return id === undefined ? [] : [[id, formatAttributePath(a.path)] as const];
    }));
    if (attrs.size > 0) {
      await tx`
        update builds b set entry_point = true, attr = a.attr
        from unnest(${[...attrs.keys()]}::uuid[], ${[...attrs.values()]}::text[]) as a(derivation_id, attr)
        join derivation_builds db on db.derivation_id = a.derivation_id
        where b.derivation_build_id = db.id and b.evaluation_id = ${evaluationId}`;
    }
    if (batch.errors.length > 0) {
      await tx`
        insert into evaluation_attribute_errors (evaluation_id, attr, message)
        select ${evaluationId}, attr, message
        from unnest(${batch.errors.map((e) => formatAttributePath(e.path))}::text[], ${batch.errors.map((e) => e.message.slice(0, 20000))}::text[]) as x(attr, message)
        on conflict do nothing`;
    }
    return { derivations: paths.length };
  });
}

/**
 * The derivations no evaluation recorded yet, in one multi-row insert (the batch travels as one
 * jsonb value, which keeps the array columns whole: unnest would flatten text[][]); drv path → id
 * of the rows it wrote (a row another recording wrote meanwhile is skipped).
 */
async function insertDerivations(tx: TransactionSql, nodes: MessageOf<'evalBatch'>['derivations']): Promise<Map<string, string>> {
  if (nodes.length === 0) return new Map();
  const rows = await tx<{ id: string; drv_path: string }[]>`
    insert into derivations (drv_path, name, system, required_features, outputs, input_srcs, timeout_secs, max_silent_secs, prefer_local_build, fixed_output)
    select n->>'drvPath', n->>'name', n->>'system', array(select jsonb_array_elements_text(n->'requiredSystemFeatures')), n->'outputs',
           array(select jsonb_array_elements_text(n->'inputSrcs')), (n->>'timeoutSecs')::integer, (n->>'maxSilentSecs')::integer,
           (n->>'preferLocalBuild')::boolean, (n->>'fixedOutput')::boolean
    from jsonb_array_elements(${tx.json(nodes)}::jsonb) with ordinality as x(n, i) order by i
    on conflict (drv_path) do nothing returning id, drv_path`;
  return new Map(rows.map((r) => [r.drv_path, r.id]));
}

/** The edges of derivations this batch wrote (one written before has its own), by id. */
async function insertEdges(tx: TransactionSql, nodes: MessageOf<'evalBatch'>['derivations'], ids: ReadonlyMap<string, string>): Promise<void> {
  const from: string[] = [];
  const to: string[] = [];
  for (const node of nodes) {
    for (const input of Object.keys(node.inputDrvs)) {
      const inputId = ids.get(input);
      if (inputId === undefined) continue;
      from.push(ids.get(node.drvPath)!);
      to.push(inputId);
    }
  }
  if (from.length === 0) return;
  await tx`
    insert into derivation_edges (derivation_id, depends_on, outputs)
    select e.derivation_id, e.depends_on, '{}' from unnest(${from}::uuid[], ${to}::uuid[]) as e(derivation_id, depends_on)
    on conflict do nothing`;
}

/**
 * Finished builds of these derivations (recorded by earlier evaluations) that are wanted again go
 * back to the queue (buildStatus.ts), found in one query.
 */
async function requeueReachedBuilds(tx: TransactionSql, emit: Emit, evaluationId: string, derivationIds: readonly string[]): Promise<void> {
  if (derivationIds.length === 0) return;
  const finished = await tx<{ id: string; status: string; outputs_cached: boolean }[]>`
    select id, status, outputs_cached from derivation_builds
    where derivation_id = any(${derivationIds as string[]}::uuid[])
      and (status = 'aborted' or (status in ('completed', 'substituted') and not outputs_cached)
           or (status = 'failed' and (select retry_failed from evaluations where id = ${evaluationId})))`;
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
