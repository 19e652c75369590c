// The caches a project's builds use: its own subscriptions and its organization's (DESIGN.md,
// "Organization subscriptions"). Mode 0 is read-write, 1 read-only, 2 write-only.
import type { Sql } from 'postgres';
import { storePathHashPart } from '../../protocol/index.js';
import { subscribedCacheRows } from '../../storage/index.js';
import type { BinaryCache } from './binaryCacheAccess.js';
import { cachePublicKeyText } from './cacheKeys.js';

/** The serving shape's identity and key, with the subscription's mode. */
export type ProjectCache = Pick<BinaryCache, 'id' | 'name' | 'public' | 'publicKey'> & { mode: number };

export async function projectCaches(sql: Sql, projectId: string): Promise<ProjectCache[]> {
  const rows = await subscribedCacheRows(sql, projectId);
  return rows.map((r) => ({ id: r.id, name: r.name, mode: r.mode, public: r.public, publicKey: cachePublicKeyText(r) }));
}

export const writable = (caches: readonly ProjectCache[]) => caches.filter((c) => c.mode === 0 || c.mode === 2);
export const readable = (caches: readonly ProjectCache[]) => caches.filter((c) => c.mode === 0 || c.mode === 1);

/** True when every output path is signed into one of `caches` (the build can be substituted). */
export async function outputsCached(sql: Sql, outputs: readonly string[], caches: readonly ProjectCache[]): Promise<boolean> {
  if (outputs.length === 0 || caches.length === 0) return false;
  const hashes = outputs.map(storePathHashPart);
  const [row] = await sql<{ held: number }[]>`
    select count(distinct hash_part)::int as held from path_signatures
    where cache_id = any(${caches.map((c) => c.id)}::uuid[]) and hash_part = any(${hashes})`;
  return (row?.held ?? 0) === new Set(hashes).size;
}
