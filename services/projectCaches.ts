import type { Sql } from 'postgres';
import { storePathHashPart } from '../protocol/index.js';
import { cachePublicKeyText } from './cacheKeys.js';

// The caches a project's builds use: its own subscriptions and its organization's (DESIGN.md,
// "Organization subscriptions"). Mode 0 is read-write, 1 read-only, 2 write-only.

export interface ProjectCache {
  id: string;
  name: string;
  mode: number;
  public: boolean;
  publicKey: string;
}

export async function projectCaches(sql: Sql, projectId: string): Promise<ProjectCache[]> {
  const rows = await sql<{ id: string; name: string; mode: number; public: boolean; key_name: string; public_key: Buffer }[]>`
    select c.id, c.name, min(s.mode)::int as mode, c.public, c.key_name, c.public_key
    from subscriptions s join caches c on c.id = s.cache_id join projects p on p.id = ${projectId}
    where c.active and (s.project_id = p.id or s.organization_id = p.organization_id)
    group by c.id, c.name, c.public, c.key_name, c.public_key order by c.name`;
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
