// What a collection pass removes from caches (docs/gc.md, "TTL", "Storage limits"), as queries on
// the NAR tables. Candidates are read in pages (of one scan, for the TTL); each page is removed in one transaction whose
// delete statement checks every rule again (live set, pins, the TTL against the newest fetch time),
// so a row that changed since the page was read stays. A removed path's cached_paths row goes when
// no cache holds it any more; its blob is for the caller (deleteBlobIfUnreferenced, under the file lock).
import type { Fragment, ISql, TransactionSql } from 'postgres';

export interface PathKey {
  cacheId: string;
  hashPart: string;
}

export interface TtlRules {
  now: Date;
  /** gc.narTtlHours (a cache's nar_ttl_hours replaces it) */
  ttlHours: number;
  /** gc.narUploadGraceHours, on top of the TTL */
  graceHours: number;
}

/**
 * Not in its cache's live set, not pinned in its cache: for path_signatures alias s. A pin made
 * after the pass computed the set added its closure to gc_pinned_paths itself (services/gc/cachePins.ts).
 */
const outsideLiveSet = (sql: ISql): Fragment => sql`
  not exists (select 1 from gc_live_paths l where l.cache_id = s.cache_id and l.hash_part = s.hash_part)
  and not exists (select 1 from gc_pinned_paths g where g.cache_id = s.cache_id and g.hash_part = s.hash_part)`;

/** Past its cache's TTL: for path_signatures s joined with its cache c. */
const pastTtl = (sql: ISql, rules: TtlRules): Fragment => sql`
  not c.keep_forever
  and coalesce(s.last_fetched_at, s.created_at)
      < ${rules.now}::timestamptz - make_interval(hours => ${rules.graceHours}::integer + coalesce(c.nar_ttl_hours, ${rules.ttlHours}::integer))`;

/**
 * Every path past its cache's TTL and outside the live set and pins, a page at a time, from one scan
 * of path_signatures (a cursor: one statement reads the table once, in no particular order, and only
 * a page is in memory). Keyset pages in (cache, hash) order read the same rows through the primary
 * key with an index probe per row: 39 s of a 53 s pass at 1,000,000 paths (bench/README.md, "gc").
 * The rows are as of the statement's start; removePaths checks each again.
 */
export async function* pathsPastTtl(sql: ISql, rules: TtlRules, page = 1000): AsyncGenerator<PathKey[]> {
  const cursor = sql<{ cache_id: string; hash_part: string }[]>`
    select s.cache_id, s.hash_part from path_signatures s join caches c on c.id = s.cache_id
    where ${pastTtl(sql, rules)} and ${outsideLiveSet(sql)}`.cursor(page);
  for await (const rows of cursor) yield rows.map((r) => ({ cacheId: r.cache_id, hashPart: r.hash_part }));
}

export interface CacheOverLimit {
  cacheId: string;
  /** stored bytes to free */
  excessBytes: number;
}

/** Caches over their own max_storage_bytes, with how much they hold beyond it. */
export async function cachesOverLimit(sql: ISql): Promise<CacheOverLimit[]> {
  const rows = await sql<{ id: string; excess: string }[]>`
    select c.id, u.used - c.max_storage_bytes as excess
    from caches c cross join lateral (
      select coalesce(sum(p.file_size), 0) as used from path_signatures s join cached_paths p on p.id = s.cached_path_id where s.cache_id = c.id) u
    where c.max_storage_bytes is not null and u.used > c.max_storage_bytes`;
  return rows.map((r) => ({ cacheId: r.id, excessBytes: Number(r.excess) }));
}

/** Bytes stored beyond cache.maxStorageGb across the instance (each blob once); 0 when under it or unset. */
export async function instanceExcessBytes(sql: ISql, maxBytes: number | null): Promise<number> {
  if (maxBytes === null) return 0;
  const [row] = await sql<{ used: string }[]>`
    select coalesce(sum(file_size), 0) as used from (select max(file_size) as file_size from cached_paths group by file_hash) blobs`;
  return Math.max(0, Number(row?.used ?? 0) - maxBytes);
}

/**
 * The least recently fetched (or uploaded, when never fetched) paths of a cache (every cache when
 * null) outside the live set and pins, until their stored sizes add up to `bytes`.
 */
export async function leastRecentlyUsed(sql: ISql, cacheId: string | null, bytes: number): Promise<PathKey[]> {
  if (bytes <= 0) return [];
  const rows = await sql<{ cache_id: string; hash_part: string }[]>`
    select cache_id, hash_part from (
      select s.cache_id, s.hash_part,
             sum(p.file_size) over (order by coalesce(s.last_fetched_at, s.created_at), s.cache_id, s.hash_part) - p.file_size as before
      from path_signatures s join cached_paths p on p.id = s.cached_path_id
      where ${cacheId === null ? sql`true` : sql`s.cache_id = ${cacheId}`} and ${outsideLiveSet(sql)}) ranked
    where before < ${bytes}`;
  return rows.map((r) => ({ cacheId: r.cache_id, hashPart: r.hash_part }));
}

export interface RemovedPath extends PathKey {
  storePath: string;
  deriver: string | null;
  fileHash: string;
  fileSize: number;
  /** no cache holds the store path (any NAR of it) any more */
  lastCopy: boolean;
}

/**
 * Removes these caches' copies in the caller's transaction, checking again that each is outside the
 * live set and pins and, with `ttl`, past its TTL. Cached path rows no signature points to go too
 * (locked first, so an upload signing into one either committed before, and the row stays, or waits
 * and finds it gone). `keepLive` false removes live and pinned copies too: the deep round's rows
 * whose blob is gone, which no client could fetch anyway.
 */
export async function removePaths(tx: TransactionSql, keys: readonly PathKey[], ttl: TtlRules | null, keepLive = true): Promise<RemovedPath[]> {
  if (keys.length === 0) return [];
  const removed = await tx<{ cache_id: string; hash_part: string; cached_path_id: string }[]>`
    delete from path_signatures s using caches c, unnest(${keys.map((k) => k.cacheId)}::uuid[], ${keys.map((k) => k.hashPart)}::text[]) as k(cache_id, hash_part)
    where c.id = s.cache_id and s.cache_id = k.cache_id and s.hash_part = k.hash_part
      and ${keepLive ? outsideLiveSet(tx) : tx`true`} ${ttl === null ? tx`` : tx`and ${pastTtl(tx, ttl)}`}
    returning s.cache_id, s.hash_part, s.cached_path_id`;
  if (removed.length === 0) return [];
  const ids = [...new Set(removed.map((r) => r.cached_path_id))];
  const paths = await tx<{ id: string; store_path: string; deriver: string | null; file_hash: string; file_size: string }[]>`
    select id, store_path, deriver, file_hash, file_size from cached_paths where id = any(${ids}::bigint[]) order by id for update`;
  await tx`
    delete from cached_paths p where p.id = any(${ids}::bigint[])
      and not exists (select 1 from path_signatures s where s.cached_path_id = p.id)`;
  // By cached_paths (its unique key leads with hash_part): path_signatures has no index on hash_part alone.
  const stillHeld = new Set((await tx<{ hash_part: string }[]>`
    select distinct p.hash_part from cached_paths p
    where p.hash_part = any(${[...new Set(removed.map((r) => r.hash_part))]}::text[])
      and exists (select 1 from path_signatures s where s.cached_path_id = p.id)`).map((r) => r.hash_part));
  const byId = new Map(paths.map((p) => [p.id, p]));
  return removed.flatMap((r) => {
    const path = byId.get(r.cached_path_id);
    if (!path) return [];
    return [{
      cacheId: r.cache_id, hashPart: r.hash_part, storePath: path.store_path, deriver: path.deriver,
      fileHash: path.file_hash, fileSize: Number(path.file_size), lastCopy: !stillHeld.has(r.hash_part),
    }];
  });
}
