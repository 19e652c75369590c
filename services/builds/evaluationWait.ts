// The spec's waits for a new evaluation ("Other transitions"): no writable cache subscription,
// or, with cache.maxStorageGb non-zero, every writable cache under 10 MiB from its limit.
import type { Sql } from 'postgres';
import { LOW_STORAGE_BYTES, type CacheStorageLimits } from '../caches/index.js';
import { projectCaches, writable } from '../caches/index.js';

/** Why a new evaluation of the project must wait, or null. */
export async function evaluationWaitReason(sql: Sql, storage: CacheStorageLimits, maxStorageGb: number, projectId: string): Promise<string | null> {
  const targets = writable(await projectCaches(sql, projectId));
  if (targets.length === 0) return 'the project has no writable cache subscription';
  if (maxStorageGb === 0) return null;
  for (const cache of targets) {
    const left = await storage.bytesLeft(cache.id);
    if (left === null || left >= LOW_STORAGE_BYTES) return null;
  }
  return 'every writable cache of the project has under 10 MiB of storage left (cache.maxStorageGb)';
}
