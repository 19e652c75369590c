// Committing several ingests at once (the paths of one `nix copy --to ssh-ng://` stream): every
// path's locks taken in one order (file hash, then hash part, so two batches never wait on each
// other in a cycle), their blobs made durable side by side, then their rows, in one transaction
// and one commit instead of one per path. When anything in it fails the transaction rolls back
// and each path is committed alone (commitIngest), so a path refused on its own (another NAR of it
// held) fails alone and the others are stored, each with its own outcome.
import { rm } from 'node:fs/promises';
import type { Sql } from 'postgres';
import type { BlobStore } from '../blobs/index.js';
import { commitIngest, forgetOrphan, lockForCommit, recordCommit, type CommitOutcome, type LockedCommit, type IngestCommit } from './commitIngest.js';
import { narBlobKey } from './narLocations.js';

export async function commitIngestBatch(sql: Sql, blobs: BlobStore, commits: readonly IngestCommit[]): Promise<PromiseSettledResult<CommitOutcome>[]> {
  if (commits.length <= 1) return Promise.allSettled(commits.map((commit) => commitIngest(sql, blobs, commit)));
  const order = commits.map((_, i) => i).sort((a, b) => {
    const x = commits[a]!;
    const y = commits[b]!;
    return x.fileHash < y.fileHash ? -1 : x.fileHash > y.fileHash ? 1 : x.hashPart < y.hashPart ? -1 : x.hashPart > y.hashPart ? 1 : 0;
  });
  let recorded: { outcome: CommitOutcome; orphaned: string | null }[];
  try {
    recorded = await sql.begin(async (tx) => {
      const locked: LockedCommit[] = [];
      for (const i of order) locked[i] = await lockForCommit(tx, commits[i]!);
      // Two paths of the batch with the same NAR file: its blob is put once.
      const puts = new Map<string, IngestCommit>();
      commits.forEach((commit, i) => {
        if (locked[i]!.needsPut && !puts.has(commit.fileHash)) puts.set(commit.fileHash, commit);
      });
      await Promise.all([...puts.values()].map((commit) => blobs.put(narBlobKey(commit.fileHash), commit.zstdFile, commit.fileSize)));
      const rows: { outcome: CommitOutcome; orphaned: string | null }[] = [];
      for (const i of order) rows[i] = await recordCommit(tx, commits[i]!, locked[i]!.stored);
      return rows;
    });
  } catch {
    // One at a time, in order; the blobs this transaction put are kept when they are still there.
    const settled: PromiseSettledResult<CommitOutcome>[] = [];
    for (const commit of commits) {
      try {
        settled.push({ status: 'fulfilled', value: await commitIngest(sql, blobs, commit, true) });
      } catch (reason) {
        settled.push({ status: 'rejected', reason });
      }
    }
    return settled;
  }
  await Promise.all(commits.map((commit) => rm(commit.zstdFile, { force: true })));
  for (const { outcome, orphaned } of recorded) await forgetOrphan(sql, blobs, orphaned, outcome);
  return recorded.map((row) => ({ status: 'fulfilled', value: row.outcome }));
}
