// Caches for tests, until the /caches API exists: a row with a freshly generated signing key,
// sealed with the installation's secret box exactly as the server would seal it.
import type { Sql } from 'postgres';
import { generateCacheKey, cachePublicKeyText } from '../../services/index.js';
import { openSecretBox } from '../../storage/index.js';

export interface TestCache {
  id: string;
  name: string;
  /** `<key name>:<base64>`, for Nix's trusted-public-keys */
  publicKey: string;
}

export interface TestCacheOptions {
  public?: boolean;
  /** a user id: the owner holds Admin on the cache */
  ownerId?: string;
  priority?: number;
  localPriority?: number;
  /** the baseDir of the server on `sql`, whose secrets/crypt.key seals the key (default: the one startTestKiln registered) */
  baseDir?: string;
}

// The server started on a test database keeps its box key under its baseDir, not in the database.
const serverBaseDirs = new WeakMap<Sql, string>();

/** Records the baseDir of the server on `sql`, for createTestCache. */
export function rememberServerBaseDir(sql: Sql, baseDir: string): void {
  serverBaseDirs.set(sql, baseDir);
}

export async function createTestCache(sql: Sql, name: string, opts: TestCacheOptions = {}): Promise<TestCache> {
  const baseDir = opts.baseDir ?? serverBaseDirs.get(sql);
  if (!baseDir) throw new Error(`createTestCache(${name}): pass the server's baseDir, whose secrets/crypt.key seals the signing key`);
  const box = await openSecretBox(sql, { baseDir, 'secrets.cryptFile': null });
  const key = generateCacheKey(box, 'kiln.test', name);
  const [row] = await sql<{ id: string }[]>`
    insert into caches (name, public, priority, local_priority, owner_id, key_name, public_key, secret_key)
    values (${name}, ${opts.public ?? false}, ${opts.priority ?? 40}, ${opts.localPriority ?? 0}, ${opts.ownerId ?? null},
            ${key.key_name}, ${key.public_key}, ${key.secret_key})
    returning id`;
  return { id: row!.id, name, publicKey: cachePublicKeyText(key) };
}

/** Gives a user a role on a cache (what accepting an invitation does). */
export async function addCacheMember(sql: Sql, cacheId: string, userId: string, role: 'Admin' | 'Write' | 'View'): Promise<void> {
  await sql`insert into cache_members (cache_id, user_id, role) values (${cacheId}, ${userId}, ${role})`;
}
