// The last step of every upload: make the blob durable, then write the cached path and the cache's
// signature row in one transaction. The per-file advisory lock is held from before the put to the
// commit, so a concurrent deleter of the same blob (pathDeletion.ts, the sweeper) either finishes
// before the put (which then brings the blob back) or sees this row and leaves the blob alone.
//
// A cached path is one version of a narinfo: the NAR and what the upload says about it (migration
// 0017). Caches share a row only when they say the same; the blob is shared by FileHash either way.
import { rm } from 'node:fs/promises';
import type { Sql, TransactionSql } from 'postgres';
import type { BlobStore } from '../blobs/index.js';
import { narBlobKey } from './narLocations.js';
import { deleteBlobIfUnreferenced } from './pathDeletion.js';
import { deleteUnsignedCachedPath, fileIsReferenced, indexDebugBuildIds, insertCachedPath, insertPathSignature, lockCachedPath, lockNarFile, type CachedPathInsert } from './sql/index.js';
import { UploadProblem } from './uploadProblem.js';

export interface IngestCommit extends CachedPathInsert {
  cacheId: string;
  signature: string;
  /** the zstd file the ingest pass wrote; taken over by the blob store or removed */
  zstdFile: string;
}

export interface CommitOutcome {
  status: 'added' | 'held';
  /** the file the cache serves the path from: this upload's, or the one stored when another cache brought the same NAR */
  fileHash: string;
  fileSize: number;
  /** the file of the copy this upload replaced (the cache held the same NAR under another narinfo) */
  replacedFileHash?: string;
}

export async function commitIngest(
  sql: Sql, blobs: BlobStore, commit: IngestCommit,
  /** a failed batch (commitIngestBatch.ts) may have moved the zstd file into the blob store already: a stored blob of the right size is kept */
  blobMayBeStored = false,
): Promise<CommitOutcome> {
  try {
    const { outcome, orphaned } = await sql.begin(async (tx) => {
      const locked = await lockForCommit(tx, commit);
      const key = narBlobKey(commit.fileHash);
      // Under the file's lock no deleter removes the blob before this commit references it.
      const already = locked.needsPut && blobMayBeStored && (await blobs.stat(key))?.size === commit.fileSize;
      if (locked.needsPut && !already) await blobs.put(key, commit.zstdFile, commit.fileSize);
      return recordCommit(tx, commit, locked.stored);
    });
    await forgetOrphan(sql, blobs, orphaned, outcome);
    return outcome;
  } finally {
    // Still there when the blob was already stored, or when the put failed (the store leaves it).
    await rm(commit.zstdFile, { force: true });
  }
}

/** What a commit found under its locks: the row another cache brought (sign it, store nothing), or whether the blob is to be put. */
export interface LockedCommit {
  stored: { id: string; fileHash: string; fileSize: number } | null;
  needsPut: boolean;
}

/** Takes the commit's locks in `tx`: the same narinfo's row, else the NAR file's advisory lock. */
export async function lockForCommit(tx: TransactionSql, commit: IngestCommit): Promise<LockedCommit> {
  // Another cache brought this very NAR with this very narinfo: sign that row, store nothing.
  // (Its file may differ from this upload's bytes, e.g. compressed by another zstd version; both are the same NAR.)
  const stored = await lockCachedPath(tx, commit);
  if (stored !== null) return { stored, needsPut: false };
  await lockNarFile(tx, commit.fileHash);
  // A referenced blob exists (the invariant), so identical bytes are not stored twice.
  return { stored: null, needsPut: !(await fileIsReferenced(tx, commit.fileHash)) };
}

/** Writes the path's rows in `tx` once its blob is durable; the orphaned file of a replaced copy, if any. */
export async function recordCommit(
  tx: TransactionSql, commit: IngestCommit, found: LockedCommit['stored'],
): Promise<{ outcome: CommitOutcome; orphaned: string | null }> {
  let stored = found;
  if (stored === null) {
    // A concurrent upload may have inserted it since the lookup: insertCachedPath returns that row then.
    const inserted = await insertCachedPath(tx, commit);
    // Uploads are indexed at once (cache.debugIndexIntervalSecs only backfills): debuginfo/{build_id} finds them.
    if (!inserted.debugIndexed) await indexDebugBuildIds(tx, inserted.id, commit.listing);
    stored = inserted;
  }
  const signed = await insertPathSignature(tx, { cacheId: commit.cacheId, hashPart: commit.hashPart, cachedPathId: stored.id, signature: commit.signature });
  if (signed.outcome === 'conflict') {
    throw new UploadProblem('path_exists', `the cache already holds another NAR of ${commit.storePath}; delete it from the cache first`);
  }
  if (signed.outcome === 'replaced') {
    // The cache's earlier copy goes with its row when no other cache says the same; its blob after the commit.
    const orphaned = await deleteUnsignedCachedPath(tx, signed.previousCachedPathId);
    return { outcome: { status: 'added', fileHash: stored.fileHash, fileSize: stored.fileSize, replacedFileHash: signed.previousFileHash }, orphaned };
  }
  return { outcome: { status: signed.outcome, fileHash: stored.fileHash, fileSize: stored.fileSize }, orphaned: null };
}

/** After the commit: the replaced copy's blob, usually the same file as the new copy's; otherwise the sweeper collects it if this fails. */
export async function forgetOrphan(sql: Sql, blobs: BlobStore, orphaned: string | null, outcome: CommitOutcome): Promise<void> {
  if (orphaned !== null && orphaned !== outcome.fileHash) await deleteBlobIfUnreferenced(sql, blobs, orphaned).catch(() => false);
}
