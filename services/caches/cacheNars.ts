// The NAR management API (docs/caches.md, "NAR management"): list, show and delete the paths a cache holds,
// and the cache's statistics. Listing, showing and stats are for anyone who may see the cache;
// deleting is for its owner (spec: Authentication 9).
import { narUrl, storePathName, type NarListQuery } from '../../protocol/index.js';
import { cacheContentStats, findCachePath, listCachePaths, type CachePathRow, type PathRemoval } from '../../storage/index.js';
import { notFound } from '../access/index.js';
import type { CacheDeps } from './cacheDeps.js';
import { cachesService, demandOwner } from './caches.js';
import { cacheStorageLimits } from './cacheStorage.js';
import { markOutputsNotCached } from './evictedOutputs.js';
import type { Principal } from '../access/index.js';

export interface NarView {
  /** the store path's hash part: how the API and the binary cache name the path */
  hash: string;
  store_path: string;
  /** the name part of the store path */
  package: string;
  nar_hash: string;
  nar_size: number;
  /** nix32 SHA-256 of the stored zstd file; served at url */
  file_hash: string;
  file_size: number;
  /** relative to the cache's root, as the narinfo's URL line */
  url: string;
  references: string[];
  deriver: string | null;
  ca: string | null;
  /** this cache's narinfo signature */
  signature: string;
  /** when the path entered this cache */
  created_at: Date;
  last_fetched_at: Date | null;
}

export interface NarPage {
  items: NarView[];
  page: number;
  per_page: number;
  /** paths matching the filters */
  total: number;
  pages: number;
}

export interface NarDeletion {
  hash: string;
  store_path: string;
  cache: string;
  /** true when no cache holds the path any more: its record is gone and its NAR file is deleted after this answer */
  last_copy: boolean;
}

export interface CacheStats {
  cache: string;
  paths: number;
  /** sum of NarSize: what clients unpack */
  nar_bytes: number;
  /** sum of the stored (zstd) file sizes: what storage limits count */
  stored_bytes: number;
  last_upload_at: Date | null;
  last_fetched_at: Date | null;
  /** the cache's own limit; null when it has none */
  max_storage_bytes: number | null;
  /** what the cache may still store under its own limit and cache.maxStorageGb; null when neither is set */
  bytes_left: number | null;
}

export const toNarView = (row: CachePathRow): NarView => ({
  hash: row.hashPart,
  store_path: row.storePath,
  package: storePathName(row.storePath),
  nar_hash: row.narHash,
  nar_size: row.narSize,
  file_hash: row.fileHash,
  file_size: row.fileSize,
  url: narUrl(row.fileHash),
  references: row.references,
  deriver: row.deriver,
  ca: row.ca,
  signature: row.signature,
  created_at: row.createdAt,
  last_fetched_at: row.lastFetchedAt,
});

export function cacheNarsService(deps: CacheDeps) {
  const { sql, nars, log } = deps;
  const caches = cachesService(deps);
  const limits = cacheStorageLimits(sql, deps.config['cache.maxStorageGb']);

  /**
   * After the answer: the blob of a path no cache holds any more is deleted (under the per-file
   * lock, so an upload of the same bytes in the meantime keeps it). A failure leaves an orphan
   * blob, which the sweeper removes later.
   */
  const settleLater = (removal: PathRemoval): void => {
    setImmediate(() => {
      nars.settleRemoval(removal).catch((err: unknown) => {
        log.warn({ err, fileHash: removal.fileHash }, 'could not delete the NAR file of a deleted path; the sweeper removes it later');
      });
    });
  };

  return {
    async list(who: Principal, cache: string, query: NarListQuery): Promise<NarPage> {
      const { row } = await caches.demandRecord(who, cache, 'viewCache');
      const { rows, total } = await listCachePaths(sql, row.id, {
        ...(query.hash === undefined ? {} : { hashPrefix: query.hash }),
        ...(query.package === undefined ? {} : { package: query.package }),
        sort: query.sort,
        order: query.order,
        limit: query.per_page,
        offset: (query.page - 1) * query.per_page,
      });
      return { items: rows.map(toNarView), page: query.page, per_page: query.per_page, total, pages: Math.ceil(total / query.per_page) };
    },

    async show(who: Principal, cache: string, hash: string): Promise<NarView & { caches: number }> {
      const { row } = await caches.demandRecord(who, cache, 'viewCache');
      const found = await findCachePath(sql, row.id, hash);
      if (!found) throw notFound(`path ${hash} in cache "${row.name}"`);
      return { ...toNarView(found), caches: found.cacheCount };
    },

    /**
     * Removes the path from this cache only (its signature row). From the last cache holding it, the
     * cached path record goes too, and the derivation builds that produced it are marked not cached,
     * in the same transaction (evictedOutputs.ts). The blob goes after the answer.
     */
    async remove(who: Principal, cache: string, hash: string): Promise<NarDeletion> {
      const { row, access } = await caches.demandRecord(who, cache, 'viewCache');
      demandOwner(who, row, access, 'deleting a cached NAR');
      const result = await deps.events.transaction(async (tx, emit) => {
        const found = await findCachePath(tx, row.id, hash);
        if (!found) return null;
        const removal = await nars.removePathFromCache(tx, row.id, hash);
        if (!removal.removed) return null;
        if (removal.lastCopy) await markOutputsNotCached(tx, found.storePath, found.deriver);
        emit('cache.nar.delete', { cache: row.name, hash, store_path: found.storePath, last_copy: removal.lastCopy }, { cacheId: row.id });
        emit('cache.changed', { cache: row.name, reason: 'nar.delete' }, { cacheId: row.id });
        return { removal, storePath: found.storePath };
      });
      if (result === null) throw notFound(`path ${hash} in cache "${row.name}"`);
      // This process stops serving it at once; other processes within the hot cache's lifetime.
      nars.reads.forget(row.id, hash, result.removal.fileHash ?? undefined);
      settleLater(result.removal);
      return { hash, store_path: result.storePath, cache: row.name, last_copy: result.removal.lastCopy };
    },

    async stats(who: Principal, cache: string): Promise<CacheStats> {
      const { row } = await caches.demandRecord(who, cache, 'viewCache');
      const [content, storage] = await Promise.all([cacheContentStats(sql, row.id), limits.storage(row.id)]);
      return {
        cache: row.name,
        paths: content.paths,
        nar_bytes: content.narBytes,
        stored_bytes: content.storedBytes,
        last_upload_at: content.lastUploadAt,
        last_fetched_at: content.lastFetchedAt,
        max_storage_bytes: storage.maxBytes,
        bytes_left: storage.leftBytes,
      };
    },
  };
}
export type CacheNarsService = ReturnType<typeof cacheNarsService>;
