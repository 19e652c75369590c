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
    // One statement per table per batch, not one per derivation: a 50,000-derivation evaluation
    // took minutes as 100,000 round trips (bench/evalRecord.bench.ts). The batch travels as one
    // jsonb value, which keeps the array columns whole (unnest would flatten text[][]).
    if (batch.derivations.length > 0) {
      await tx`
        insert into derivations (drv_path, name, system, required_features, outputs, input_srcs, timeout_secs, max_silent_secs, prefer_local_build, fixed_output)
        select n->>'drvPath', n->>'name', n->>'system', array(select jsonb_array_elements_text(n->'requiredSystemFeatures')), n->'outputs',
               array(select jsonb_array_elements_text(n->'inputSrcs')), (n->>'timeoutSecs')::integer, (n->>'maxSilentSecs')::integer,
               (n->>'preferLocalBuild')::boolean, (n->>'fixedOutput')::boolean
        from jsonb_array_elements(${tx.json(batch.derivations)}::jsonb) with ordinality as x(n, i) order by i
        on conflict (drv_path) do nothing`;
    }
    const from: string[] = [];
    const to: string[] = [];
    for (const node of batch.derivations) {
      for (const input of Object.keys(node.inputDrvs)) {
        from.push(node.drvPath);
        to.push(input);
      }
    }
    if (from.length > 0) {
      await tx`
        insert into derivation_edges (derivation_id, depends_on, outputs)
        select d.id, i.id, '{}' from unnest(${from}::text[], ${to}::text[]) as e(drv, input)
        join derivations d on d.drv_path = e.drv join derivations i on i.drv_path = e.input
        on conflict do nothing`;
    }
    const paths = batch.derivations.map((n) => n.drvPath);
    if (paths.length > 0) {
      await insertDerivationBuilds(tx, paths);
      await tx`
        insert into builds (evaluation_id, derivation_build_id)
        select ${evaluationId}, b.id from derivation_builds b join derivations d on d.id = b.derivation_id where d.drv_path = any(${paths})
        on conflict do nothing`;
      // After the insert above, so the re-queues' events reach this evaluation's builds too, and an
      // abort that checks for open evaluations afterwards sees this one.
      await requeueReachedBuilds(tx, emit, evaluationId, paths);
    }
    // The last attribute naming a derivation wins, as it did when each one was its own update.
    const attrs = new Map(batch.attributes.map((a) => [a.drvPath, formatAttributePath(a.path)]));
    if (attrs.size > 0) {
      await tx`
        update builds b set entry_point = true, attr = a.attr
        from unnest(${[...attrs.keys()]}::text[], ${[...attrs.values()]}::text[]) as a(drv, attr)
        join derivations d on d.drv_path = a.drv join derivation_builds db on db.derivation_id = d.id
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

/** Finished builds of these derivations that are wanted again go back to the queue (buildStatus.ts). */
async function requeueReachedBuilds(tx: TransactionSql, emit: Emit, evaluationId: string, paths: readonly string[]): Promise<void> {
  // A finished build whose output was deleted from the last cache holding it (evictedOutputs.ts):
  // substituted if a cache got the path back meanwhile, built otherwise.
  const evicted = await tx<{ id: string }[]>`
    select db.id from derivation_builds db join derivations d on d.id = db.derivation_id
    where d.drv_path = any(${paths as string[]}) and not db.outputs_cached and db.status in ('completed', 'substituted')`;
  const requeued = await applyStatusChanges(tx, emit, evicted.map((b) => b.id), { event: { type: 'requeue', why: 'evicted' } });
  if (requeued.length > 0) await tx`update derivation_builds set outputs_cached = true where id = any(${requeued}::uuid[])`;
  // A build cancelled when another evaluation was aborted (buildAborts.ts).
  const aborted = await tx<{ id: string }[]>`
    select db.id from derivation_builds db join derivations d on d.id = db.derivation_id
    where d.drv_path = any(${paths as string[]}) and db.status = 'aborted'`;
  await applyStatusChanges(tx, emit, aborted.map((b) => b.id), { event: { type: 'requeue', why: 'reached_again' } });
  // A restarted evaluation (evaluations.ts) tries its failed builds again, with fresh attempts.
  const failed = await tx<{ id: string }[]>`
    select db.id from derivation_builds db join derivations d on d.id = db.derivation_id
    where d.drv_path = any(${paths as string[]}) and db.status = 'failed'
      and (select retry_failed from evaluations where id = ${evaluationId})`;
  const retried = await applyStatusChanges(tx, emit, failed.map((b) => b.id), { event: { type: 'requeue', why: 'restarted' } });
  if (retried.length > 0) await tx`update derivation_builds set attempts = 0 where id = any(${retried}::uuid[])`;
}
