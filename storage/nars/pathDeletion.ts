// Deleting a path from a cache (DESIGN.md: "deleting from one cache removes only that row"). The
// rows go in the caller's transaction; the blob goes after the response, and only when no cached
// path points at it any more, under the per-file lock that uploads of the same bytes also take.
import type { ISql, Sql } from 'postgres';
import type { BlobStore } from '../blobs/index.js';
import { narBlobKey } from './narLocations.js';
import { deletePathSignature, deleteUnsignedCachedPath, fileIsReferenced, lockNarFile, narIsHeld, referencedFiles } from './sql/index.js';

export interface PathRemoval {
  cacheId: string;
  hashPart: string;
  /** false when the cache did not hold the path */
  removed: boolean;
  /** the path's NAR file */
  fileHash: string | null;
  /** true when no cache holds this NAR of the path any more (under any narinfo) and the cache's cached path row is gone too */
  lastCopy: boolean;
}

/** Inside the request's transaction: the cache's signature row, and the cached path when this was the last cache. */
export async function removePathFromCache(tx: ISql, cacheId: string, hashPart: string): Promise<PathRemoval> {
  const signature = await deletePathSignature(tx, cacheId, hashPart);
  if (signature === null) return { cacheId, hashPart, removed: false, fileHash: null, lastCopy: false };
  const deleted = await deleteUnsignedCachedPath(tx, signature.cachedPathId);
  // Another cache may hold the same NAR under a narinfo of its own: then this was not the last copy
  // (and the blob, if that copy's file differs, waits for the sweeper).
  const lastCopy = deleted !== null && !(await narIsHeld(tx, hashPart, signature.narHash));
  return { cacheId, hashPart, removed: true, fileHash: signature.fileHash, lastCopy };
}

/** Deletes the blob of `fileHash` unless a cached path points at it; true when it was deleted. */
export async function deleteBlobIfUnreferenced(sql: Sql, blobs: BlobStore, fileHash: string): Promise<boolean> {
  return sql.begin(async (tx) => {
    await lockNarFile(tx, fileHash);
    if (await fileIsReferenced(tx, fileHash)) return false;
    // Inside the lock: an upload of the same bytes waits, then stores the blob again.
    await blobs.delete(narBlobKey(fileHash));
    return true;
  });
}

/**
 * deleteBlobIfUnreferenced for many files in one transaction (a collection pass frees them by the
 * thousand): every file's lock is taken, in order so two such batches cannot deadlock, then the
 * unreferenced ones are deleted. The number deleted.
 */
export async function deleteBlobsIfUnreferenced(sql: Sql, blobs: BlobStore, fileHashes: readonly string[]): Promise<number> {
  const sorted = [...new Set(fileHashes)].sort();
  if (sorted.length === 0) return 0;
  return sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(hashtextextended('nar:' || f, 0)) from unnest(${sorted}::text[]) as f order by f`;
    const referenced = await referencedFiles(tx, sorted);
    const unreferenced = sorted.filter((f) => !referenced.has(f));
    await Promise.all(unreferenced.map((f) => blobs.delete(narBlobKey(f))));
    return unreferenced.length;
  });
}
