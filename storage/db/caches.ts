// The caches table: every query on it and the one row shape it reads as (docs/architecture.md,
// "Who owns the SQL"). Services decide permissions, transactions and events; they pass a pool or
// a transaction here and get rows back. Sealed secret keys are read only by cacheSealedKey and
// cachePreviousSealedKey; the key ring (the previous key of a rotation) is here too.
import type { ISql } from 'postgres';
import type { Role } from '../../protocol/index.js';

/** A cache as the API and the access checks read it, with the caller's role on it. */
export interface CacheRow {
  id: string;
  name: string;
  description: string;
  public: boolean;
  priority: number;
  /** applied instead of priority for clients in http.localIps when non-zero */
  local_priority: number;
  active: boolean;
  owner_id: string | null;
  /** the owner's username; null when nobody owns it or the account was deleted */
  owner: string | null;
  /** bigint as text; null: only cache.maxStorageGb applies */
  max_storage_bytes: string | null;
  /** the cache's own NAR TTL; null: gc.narTtlHours */
  nar_ttl_hours: number | null;
  /** exempt from the NAR TTL */
  keep_forever: boolean;
  key_name: string;
  /** 32 bytes */
  public_key: Buffer;
  state_managed: boolean;
  created_at: Date;
  /** the caller's role: Admin for the owner, else its membership's */
  role: Role | null;
}

/** The columns a signing key is opened from (services/caches/cacheKeys.ts); secret_key is sealed. */
export interface CacheKeyColumns {
  key_name: string;
  /** 32 bytes */
  public_key: Buffer;
  /** sealed libsodium secret key (seed ‖ public key, 64 bytes) */
  secret_key: Buffer;
}

/** What the binary cache routes serve a cache with: its settings and its public key, never the private one. */
export type CacheServingRow = Pick<CacheRow, 'id' | 'name' | 'public' | 'active' | 'priority' | 'local_priority'> & Omit<CacheKeyColumns, 'secret_key'>;

/** A cache a project's builds use, with the strongest mode of its subscriptions (0 rw, 1 read, 2 write). */
export type SubscribedCacheRow = Pick<CacheRow, 'id' | 'name' | 'public' | 'key_name' | 'public_key'> & { mode: number };

/** The settings a cache is created or declared with. */
export interface NewCache extends CacheKeyColumns {
  name: string;
  description: string;
  public: boolean;
  priority: number;
  owner_id: string | null;
}

/** A PATCH: null leaves a setting as it is; max_storage_bytes and owner_id are written as given. */
export interface CacheSettings {
  description: string | null;
  public: boolean | null;
  priority: number | null;
  local_priority: number | null;
  max_storage_bytes: string | number | null;
  /** written as given, like max_storage_bytes */
  nar_ttl_hours: number | null;
  keep_forever: boolean | null;
  owner_id: string | null;
}

/** `userId`: the caller's account, null for an anonymous caller (no role anywhere). */
const rowsWithRole = (sql: ISql, userId: string | null) => sql`
  select c.id, c.name, c.description, c.public, c.priority, c.local_priority, c.active, c.owner_id, u.username as owner,
         c.max_storage_bytes, c.nar_ttl_hours, c.keep_forever, c.key_name, c.public_key, c.state_managed, c.created_at,
         case when c.owner_id is not null and c.owner_id = ${userId} then 'Admin' else m.role end as role
  from caches c
  left join users u on u.id = c.owner_id
  left join cache_members m on m.cache_id = c.id and m.user_id = ${userId}`;

export async function cacheRowNamed(sql: ISql, userId: string | null, name: string): Promise<CacheRow | null> {
  const [row] = await sql<CacheRow[]>`${rowsWithRole(sql, userId)} where c.name = ${name}`;
  return row ?? null;
}

export async function cacheRowById(sql: ISql, userId: string | null, id: string): Promise<CacheRow | null> {
  const [row] = await sql<CacheRow[]>`${rowsWithRole(sql, userId)} where c.id = ${id}`;
  return row ?? null;
}

/** Public caches and those the caller owns or is a member of, by name; the access rules filter further (key pins). */
export async function candidateCacheRows(sql: ISql, userId: string | null): Promise<CacheRow[]> {
  return sql<CacheRow[]>`
    ${rowsWithRole(sql, userId)}
    where c.public or c.owner_id = ${userId} or m.role is not null
    order by c.name`;
}

/** Every cache with the caller's role on it, for filters that need more than visibility. */
export async function allCacheRows(sql: ISql, userId: string | null): Promise<CacheRow[]> {
  return sql<CacheRow[]>`${rowsWithRole(sql, userId)} order by c.name`;
}

export async function cacheIdNamed(sql: ISql, name: string): Promise<string | null> {
  const [row] = await sql<{ id: string }[]>`select id from caches where name = ${name}`;
  return row?.id ?? null;
}

export async function cacheNameOf(sql: ISql, id: string): Promise<string | null> {
  const [row] = await sql<{ name: string }[]>`select name from caches where id = ${id}`;
  return row?.name ?? null;
}

/** The cache `name` (any case) as the binary cache routes serve it, or null. */
export async function cacheServingRow(sql: ISql, name: string): Promise<CacheServingRow | null> {
  const [row] = await sql<CacheServingRow[]>`
    select id, name, public, active, priority, local_priority, key_name, public_key from caches where name = ${name}`;
  return row ?? null;
}

/** The active caches among `names`, for /proto pushes. */
export async function activeCachesNamed(sql: ISql, names: readonly string[]): Promise<Pick<CacheRow, 'id' | 'name'>[]> {
  return sql<Pick<CacheRow, 'id' | 'name'>[]>`select id, name from caches where name = any(${names as string[]}) and active`;
}

/** The sealed signing key of the cache `id`, or null when it is gone: the only read of secret_key (services/caches/cacheSigningKeys.ts opens it). */
export async function cacheSealedKey(sql: ISql, id: string): Promise<Pick<CacheKeyColumns, 'key_name' | 'secret_key'> | null> {
  const [row] = await sql<Pick<CacheKeyColumns, 'key_name' | 'secret_key'>[]>`select key_name, secret_key from caches where id = ${id}`;
  return row ?? null;
}

/** A cache's key before its last rotation, listed until `listed_until` (cache_previous_keys). */
export interface PreviousKeyRow {
  key_name: string;
  /** 32 bytes */
  public_key: Buffer;
  rotated_at: Date;
  listed_until: Date;
}

export type RotateOutcome = { rotated: true; intervalOverridden: boolean } | { rotated: false; reason: 'gone' } | { rotated: false; reason: 'too_soon'; nextAllowedAt: Date };

/**
 * Moves the cache's key to cache_previous_keys (replacing an older previous key, whose overlap ends
 * now) and installs `next`. Inside the caller's transaction; the cache row is locked first, so two
 * rotations at once run one after the other. Refused sooner than `minIntervalMs` after the last
 * rotation unless `force` (then `intervalOverridden` says whether it was sooner). False when the
 * cache is gone.
 */
export async function rotateCacheKey(sql: ISql, id: string, next: CacheKeyColumns, rotatedAt: Date, listedUntil: Date, minIntervalMs = 0, force = false): Promise<RotateOutcome> {
  const [locked] = await sql<{ key_rotated_at: Date | null }[]>`select key_rotated_at from caches where id = ${id} for update`;
  if (!locked) return { rotated: false, reason: 'gone' };
  // Under the row lock: of two rotations at once, the second sees the first's time.
  const nextAllowedAt = locked.key_rotated_at === null ? null : new Date(locked.key_rotated_at.getTime() + minIntervalMs);
  const tooSoon = nextAllowedAt !== null && rotatedAt.getTime() < nextAllowedAt.getTime();
  if (nextAllowedAt !== null && tooSoon && !force) return { rotated: false, reason: 'too_soon', nextAllowedAt };
  await sql`
    insert into cache_previous_keys (cache_id, key_name, public_key, secret_key, rotated_at, listed_until)
    select id, key_name, public_key, secret_key, ${rotatedAt}, ${listedUntil} from caches where id = ${id}
    on conflict (cache_id) do update set key_name = excluded.key_name, public_key = excluded.public_key,
      secret_key = excluded.secret_key, rotated_at = excluded.rotated_at, listed_until = excluded.listed_until`;
  await sql`update caches set key_name = ${next.key_name}, public_key = ${next.public_key}, secret_key = ${next.secret_key}, key_rotated_at = ${rotatedAt} where id = ${id}`;
  return { rotated: true, intervalOverridden: tooSoon };
}

/** The cache's previous key while it is listed at `at`, or null. */
export async function cachePreviousKey(sql: ISql, id: string, at: Date): Promise<PreviousKeyRow | null> {
  const [row] = await sql<PreviousKeyRow[]>`
    select key_name, public_key, rotated_at, listed_until from cache_previous_keys where cache_id = ${id} and listed_until > ${at}`;
  return row ?? null;
}

/** The previous key's sealed secret while it is listed at `at` (services/caches/cacheSigningKeys.ts opens it), or null. */
export async function cachePreviousSealedKey(sql: ISql, id: string, at: Date): Promise<Pick<CacheKeyColumns, 'key_name' | 'secret_key'> | null> {
  const [row] = await sql<Pick<CacheKeyColumns, 'key_name' | 'secret_key'>[]>`
    select key_name, secret_key from cache_previous_keys where cache_id = ${id} and listed_until > ${at}`;
  return row ?? null;
}

/** What the sign sweep walks: every cache with its key name and its previous key's name while listed at `at`. */
export async function cacheKeyNames(sql: ISql, at: Date): Promise<{ id: string; key_name: string; previous_key_name: string | null }[]> {
  return sql<{ id: string; key_name: string; previous_key_name: string | null }[]>`
    select c.id, c.key_name, k.key_name as previous_key_name
    from caches c left join cache_previous_keys k on k.cache_id = c.id and k.listed_until > ${at}
    order by c.id`;
}

/** Previous keys whose overlap ended by `at`: their signatures leave the narinfos, then the row goes (endPreviousKey). */
export async function endedPreviousKeys(sql: ISql, at: Date): Promise<{ cache_id: string; key_name: string }[]> {
  return sql<{ cache_id: string; key_name: string }[]>`select cache_id, key_name from cache_previous_keys where listed_until <= ${at}`;
}

/** Removes the previous key `keyName` of the cache, unless a newer rotation replaced it meanwhile. */
export async function endPreviousKey(sql: ISql, cacheId: string, keyName: string): Promise<void> {
  await sql`delete from cache_previous_keys where cache_id = ${cacheId} and key_name = ${keyName}`;
}

/** The active caches a project subscribes to, itself or through its organization, by name. */
export async function subscribedCacheRows(sql: ISql, projectId: string): Promise<SubscribedCacheRow[]> {
  return sql<SubscribedCacheRow[]>`
    select c.id, c.name, min(s.mode)::int as mode, c.public, c.key_name, c.public_key
    from subscriptions s join caches c on c.id = s.cache_id join projects p on p.id = ${projectId}
    where c.active and (s.project_id = p.id or s.organization_id = p.organization_id)
    group by c.id, c.name, c.public, c.key_name, c.public_key order by c.name`;
}

/** Creates a cache; `stateManaged` marks one the state file declares. Throws 23505 when the name is taken. */
export async function insertCache(sql: ISql, cache: NewCache, stateManaged = false): Promise<string> {
  const [row] = await sql<{ id: string }[]>`
    insert into caches (name, description, public, priority, owner_id, key_name, public_key, secret_key, state_managed)
    values (${cache.name}, ${cache.description}, ${cache.public}, ${cache.priority}, ${cache.owner_id},
            ${cache.key_name}, ${cache.public_key}, ${cache.secret_key}, ${stateManaged})
    returning id`;
  return row!.id;
}

export async function updateCacheSettings(sql: ISql, id: string, settings: CacheSettings): Promise<void> {
  await sql`
    update caches set
      description = coalesce(${settings.description}, description),
      public = coalesce(${settings.public}, public),
      priority = coalesce(${settings.priority}, priority),
      local_priority = coalesce(${settings.local_priority}, local_priority),
      max_storage_bytes = ${settings.max_storage_bytes},
      nar_ttl_hours = ${settings.nar_ttl_hours},
      keep_forever = coalesce(${settings.keep_forever}, keep_forever),
      owner_id = ${settings.owner_id}
    where id = ${id}`;
}

export async function setCacheActive(sql: ISql, id: string, active: boolean): Promise<void> {
  await sql`update caches set active = ${active} where id = ${id}`;
}

/** Its signature rows, memberships, subscriptions and webhooks go with it (foreign keys cascade). */
export async function deleteCache(sql: ISql, id: string): Promise<void> {
  await sql`delete from caches where id = ${id}`;
}

/** The state file's settings for an existing cache, which it now manages. */
export async function declareCache(sql: ISql, id: string, cache: Pick<NewCache, 'description' | 'public' | 'priority' | 'owner_id'>): Promise<void> {
  await sql`
    update caches set description = ${cache.description}, public = ${cache.public}, priority = ${cache.priority},
                      owner_id = ${cache.owner_id}, state_managed = true
    where id = ${id}`;
}

/** Caches the state file no longer declares stay, managed by the API again. */
export async function releaseUndeclaredCaches(sql: ISql, declaredIds: readonly string[]): Promise<void> {
  await sql`update caches set state_managed = false where state_managed and not (id = any(${declaredIds}::uuid[]))`;
}

/** Names of caches by id (collection reports name the caches they swept); missing ids are left out. */
export async function cacheNames(sql: ISql, ids: readonly string[]): Promise<Map<string, string>> {
  if (ids.length === 0) return new Map();
  const rows = await sql<{ id: string; name: string }[]>`select id, name from caches where id = any(${ids as string[]}::uuid[])`;
  return new Map(rows.map((r) => [r.id, r.name]));
}

/** Every cache's stored (compressed) NAR bytes and store paths, for the metrics scrape. */
export async function cacheStorageTotals(sql: ISql): Promise<{ name: string; bytes: number; paths: number }[]> {
  const rows = await sql<{ name: string; bytes: string; paths: number }[]>`
    select c.name, coalesce(sum(p.file_size), 0) as bytes, count(p.id)::int as paths
    from caches c left join path_signatures s on s.cache_id = c.id left join cached_paths p on p.id = s.cached_path_id
    group by c.id`;
  return rows.map((r) => ({ name: r.name, bytes: Number(r.bytes), paths: r.paths }));
}
