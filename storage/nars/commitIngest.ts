// The last step of every upload: make the blob durable, then write the cached path and the cache's
// signature row in one transaction. The per-file advisory lock is held from before the put to the
// commit, so a concurrent deleter of the same blob (pathDeletion.ts, the sweeper) either finishes
// before the put (which then brings the blob back) or sees this row and leaves the blob alone.
//
// A cached path is one version of a narinfo: the NAR and what the upload says about it (migration
// 0017). Caches share a row only when they say the same; the blob is shared by FileHash either way.
import { rm } from 'node:fs/promises';
import type { Sql } from 'postgres';
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

export async function commitIngest(sql: Sql, blobs: BlobStore, commit: IngestCommit): Promise<CommitOutcome> {
  try {
    const { outcome, orphaned } = await sql.begin(async (tx): Promise<{ outcome: CommitOutcome; orphaned: string | null }> => {
      // Another cache brought this very NAR with this very narinfo: sign that row, store nothing.
      // (Its file may differ from this upload's bytes, e.g. compressed by another zstd version; both are the same NAR.)
      let stored = await lockCachedPath(tx, commit);
      if (stored === null) {
        await lockNarFile(tx, commit.fileHash);
        // A referenced blob exists (the invariant), so identical bytes are not stored twice.
        if (!(await fileIsReferenced(tx, commit.fileHash))) await blobs.put(narBlobKey(commit.fileHash), commit.zstdFile, commit.fileSize);
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
    });
    // Usually the same file as the new copy's; otherwise the sweeper collects it if this fails.
    if (orphaned !== null && orphaned !== outcome.fileHash) await deleteBlobIfUnreferenced(sql, blobs, orphaned).catch(() => false);
    return outcome;
  } finally {
    // Still there when the blob was already stored, or when the put failed (the store leaves it).
    await rm(commit.zstdFile, { force: true });
  }
}
