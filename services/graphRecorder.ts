import type { Sql } from 'postgres';
import { formatAttributePath, type MessageOf } from '../protocol/index.js';

// Records an evaluation's derivation graph as its evalBatch messages arrive (docs/builds.md).
// A derivation is written once however many evaluations reach it, with one shared
// derivation_build; each evaluation gets its own builds rows pointing at the shared ones.
// Batches of one evaluation are recorded in order (the caller chains them), and derivations come
// after their inputs, so every edge's target already has a row.

export async function recordEvalBatch(sql: Sql, evaluationId: string, batch: MessageOf<'evalBatch'>): Promise<{ derivations: number }> {
  return sql.begin(async (tx) => {
    for (const node of batch.derivations) {
      await tx`
        insert into derivations (drv_path, name, system, required_features, outputs, input_srcs, timeout_secs, max_silent_secs, prefer_local_build, fixed_output)
        values (${node.drvPath}, ${node.name}, ${node.system}, ${node.requiredSystemFeatures}, ${tx.json(node.outputs)}, ${node.inputSrcs},
                ${node.timeoutSecs}, ${node.maxSilentSecs}, ${node.preferLocalBuild}, ${node.fixedOutput})
        on conflict (drv_path) do nothing`;
      const inputs = Object.entries(node.inputDrvs);
      if (inputs.length > 0) {
        await tx`
          insert into derivation_edges (derivation_id, depends_on, outputs)
          select d.id, i.id, '{}' from derivations d, derivations i
          where d.drv_path = ${node.drvPath} and i.drv_path = any(${inputs.map(([drv]) => drv)})
          on conflict do nothing`;
      }
    }
    const paths = batch.derivations.map((n) => n.drvPath);
    if (paths.length > 0) {
      await tx`
        insert into derivation_builds (derivation_id)
        select id from derivations where drv_path = any(${paths}) on conflict (derivation_id) do nothing`;
      await tx`
        insert into builds (evaluation_id, derivation_build_id)
        select ${evaluationId}, b.id from derivation_builds b join derivations d on d.id = b.derivation_id where d.drv_path = any(${paths})
        on conflict do nothing`;
    }
    for (const attribute of batch.attributes) {
      await tx`
        update builds b set entry_point = true, attr = ${formatAttributePath(attribute.path)}
        from derivation_builds db join derivations d on d.id = db.derivation_id
        where b.derivation_build_id = db.id and b.evaluation_id = ${evaluationId} and d.drv_path = ${attribute.drvPath}`;
    }
    for (const error of batch.errors) {
      await tx`
        insert into evaluation_attribute_errors (evaluation_id, attr, message)
        values (${evaluationId}, ${formatAttributePath(error.path)}, ${error.message.slice(0, 20000)}) on conflict do nothing`;
    }
    return { derivations: paths.length };
  });
}
