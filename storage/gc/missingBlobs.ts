// The deep round's check of rows against blob files (docs/gc.md, "Deep rounds"): every
// cached_paths row's blob must exist. Rows are written only after their blob (0005_nars.sql), so
// a row without one is damage (a blob deleted by hand, a lost volume): the round removes its copies.
import type { ISql, Sql, TransactionSql } from 'postgres';
import type { BlobStore } from '../blobs/index.js';
import { lockNarFile, narBlobKey } from '../nars/index.js';
import { removePaths, type RemovedPath } from './collectPaths.js';

/** The next page of distinct file hashes of cached paths after `after`, in order. */
export async function storedFileHashes(sql: ISql, after: string | null, limit = 500): Promise<string[]> {
  const rows = await sql<{ file_hash: string }[]>`
    select distinct file_hash from cached_paths where ${after === null ? sql`true` : sql`file_hash > ${after}`}
    order by file_hash limit ${limit}`;
  return rows.map((r) => r.file_hash);
}

/** Of these file hashes, the ones whose blob is missing. */
export async function missingBlobs(blobs: BlobStore, fileHashes: readonly string[]): Promise<string[]> {
  const missing: string[] = [];
  for (const fileHash of fileHashes) if ((await blobs.stat(narBlobKey(fileHash))) === null) missing.push(fileHash);
  return missing;
}

/**
 * Removes every cache copy of a file whose blob is missing, confirmed under the file's lock (an
 * upload of the same bytes in flight holds it from its put to its commit). `alongside` runs in the
 * same transaction with what was removed (marking derivation outputs not cached).
 */
export async function removeCopiesOfMissingBlob(
  sql: Sql, blobs: BlobStore, fileHash: string, alongside: (tx: TransactionSql, removed: RemovedPath[]) => Promise<void>,
): Promise<RemovedPath[]> {
  return sql.begin(async (tx) => {
    await lockNarFile(tx, fileHash);
    if ((await blobs.stat(narBlobKey(fileHash))) !== null) return [];
    const rows = await tx<{ cache_id: string; hash_part: string }[]>`
      select s.cache_id, s.hash_part from path_signatures s join cached_paths p on p.id = s.cached_path_id where p.file_hash = ${fileHash}`;
    const removed = await removePaths(tx, rows.map((r) => ({ cacheId: r.cache_id, hashPart: r.hash_part })), null, false);
    await alongside(tx, removed);
    return removed;
  });
}
