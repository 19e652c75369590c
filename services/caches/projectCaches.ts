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

/** One question to outputsCached: may these outputs be substituted from one of these caches? */
export interface OutputsQuestion<K> {
  key: K;
  outputs: readonly string[];
  caches: readonly ProjectCache[];
}

/**
 * The keys of the questions whose every output path is signed into one of their caches (the build
 * can be substituted), answered with one query however many questions a scheduler pass asks.
 */
export async function outputsCached<K>(sql: Sql, questions: readonly OutputsQuestion<K>[]): Promise<Set<K>> {
  const asked = questions.filter((q) => q.outputs.length > 0 && q.caches.length > 0);
  const answered = new Set<K>();
  if (asked.length === 0) return answered;
  const cacheIds = [...new Set(asked.flatMap((q) => q.caches.map((c) => c.id)))];
  const hashes = [...new Set(asked.flatMap((q) => q.outputs.map(storePathHashPart)))];
  const held = new Set((await sql<{ cache_id: string; hash_part: string }[]>`
    select cache_id, hash_part from path_signatures where cache_id = any(${cacheIds}::uuid[]) and hash_part = any(${hashes})`)
    .map((r) => `${r.cache_id}/${r.hash_part}`));
  for (const q of asked) {
    if (q.outputs.every((o) => q.caches.some((c) => held.has(`${c.id}/${storePathHashPart(o)}`)))) answered.add(q.key);
  }
  return answered;
}
