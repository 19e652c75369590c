// Derivation outputs no cache holds any more (docs/binary-cache.md, "Deletion and sweeping"): when the last cache's
// copy of a path is deleted, the derivation builds that produced it are marked not cached in the
// same transaction. Whether a path is in a cache is read from path_signatures (projectCaches.ts);
// the mark is for a build that already finished: the next evaluation reaching it queues it again
// (graphRecorder.ts) instead of taking the deleted output for granted.
import type { ISql } from 'postgres';

/**
 * Marks the builds of the derivation that `deriver` names (the narinfo's Deriver, a base name),
 * when one of its outputs is `storePath`; how many were marked. A path uploaded without a Deriver
 * has no derivation kiln knows of.
 */
export async function markOutputsNotCached(tx: ISql, storePath: string, deriver: string | null): Promise<number> {
  if (deriver === null) return 0;
  const drvPath = `${storePath.slice(0, storePath.lastIndexOf('/'))}/${deriver}`;
  const rows = await tx`
    update derivation_builds db set outputs_cached = false, updated_at = now()
    from derivations d
    where d.id = db.derivation_id and d.drv_path = ${drvPath} and db.outputs_cached
      and exists (select from jsonb_each_text(d.outputs) o where o.value = ${storePath})
    returning db.id`;
  return rows.length;
}

/** markOutputsNotCached for many paths in one statement (a collection pass removes them by the thousand). */
export async function markManyOutputsNotCached(tx: ISql, paths: readonly { storePath: string; deriver: string | null }[]): Promise<number> {
  const withDeriver = paths.filter((p): p is { storePath: string; deriver: string } => p.deriver !== null);
  if (withDeriver.length === 0) return 0;
  const rows = await tx`
    update derivation_builds db set outputs_cached = false, updated_at = now()
    from derivations d, unnest(${withDeriver.map((p) => p.storePath)}::text[],
                               ${withDeriver.map((p) => `${p.storePath.slice(0, p.storePath.lastIndexOf('/'))}/${p.deriver}`)}::text[]) as x(store_path, drv_path)
    where d.id = db.derivation_id and d.drv_path = x.drv_path and db.outputs_cached
      and exists (select from jsonb_each_text(d.outputs) o where o.value = x.store_path)
    returning db.id`;
  return rows.length;
}
