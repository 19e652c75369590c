// Collects what unfinished work leaves behind (DESIGN.md, "Sweeps"): staged uploads not written to
// for nar.partialTtlSecs, temporary files of ingests a crash interrupted, cached paths no cache
// holds any more, and blobs no row points to once gc.narUploadGraceHours have passed (the grace
// covers the gap between an upload's put and its commit). Every deletion is safe to run in several
// server processes at once: rows are deleted with `delete … returning`, blobs under the file lock.
import { opendir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Sql } from 'postgres';
import { parseNarUrl } from '../../protocol/index.js';
import type { BlobStore } from '../blobs/index.js';
import type { StagingArea } from './narLocations.js';
import { deleteBlobIfUnreferenced } from './pathDeletion.js';
import { deleteAbandonedCachedPaths, deleteExpiredStagedUploads, listStagedUploadKeys, referencedFiles } from './sql/index.js';

export interface SweepDeps {
  sql: Sql;
  blobs: BlobStore;
  staging: StagingArea;
  log: Logger;
  /** nar.partialTtlSecs; 0 keeps unfinished uploads forever */
  partialTtlSecs: number;
  /** gc.narUploadGraceHours */
  graceHours: number;
}

export interface SweepReport {
  stagedUploads: number;
  stagingFiles: number;
  partialBlobs: number;
  cachedPaths: number;
  blobs: number;
}

async function* entriesIn(dir: string): AsyncGenerator<string> {
  let entries;
  try {
    entries = await opendir(dir);
  } catch {
    return;
  }
  for await (const entry of entries) yield join(dir, entry.name);
}

/** One sweep; `now` is a parameter so tests can age things without waiting. */
export async function sweepNarStorage(deps: SweepDeps, now = new Date()): Promise<SweepReport> {
  const report: SweepReport = { stagedUploads: 0, stagingFiles: 0, partialBlobs: 0, cachedPaths: 0, blobs: 0 };
  if (deps.partialTtlSecs > 0) {
    const partialBefore = new Date(now.getTime() - deps.partialTtlSecs * 1000);
    for (const expired of await deleteExpiredStagedUploads(deps.sql, partialBefore)) {
      await rm(deps.staging.uploadFile(expired.cacheId, expired.uploadKey), { force: true });
      await rm(deps.staging.framesDir(expired.cacheId, expired.uploadKey, expired.createdAt), { recursive: true, force: true });
      report.stagedUploads++;
    }
    // Files and frames whose row is gone (expired above, deleted with its cache), or that a crash left in tmp/.
    const live = await listStagedUploadKeys(deps.sql);
    const kept = new Set(live.flatMap((k) => [deps.staging.uploadFile(k.cacheId, k.uploadKey), deps.staging.framesDir(k.cacheId, k.uploadKey, k.createdAt)]));
    for (const folder of ['uploads', 'tmp', 'frames']) {
      for await (const path of entriesIn(join(deps.staging.root, folder))) {
        if (kept.has(path)) continue;
        const info = await stat(path).catch(() => null);
        if (info === null || info.mtime >= partialBefore) continue;
        await rm(path, { recursive: true, force: true });
        report.stagingFiles++;
      }
    }
    try {
      report.partialBlobs = await deps.blobs.sweepPartial(partialBefore);
    } catch (err) {
      // Some S3-compatible servers cannot list multipart uploads; a bucket lifecycle rule covers them (docs/storage.md).
      deps.log.warn({ err }, 'could not sweep abandoned partial blob writes; the rest of the sweep goes on');
    }
  }

  const graceBefore = new Date(now.getTime() - deps.graceHours * 3600_000);
  const maybeOrphaned = new Set<string>();
  for (;;) {
    const batch = await deleteAbandonedCachedPaths(deps.sql, graceBefore);
    report.cachedPaths += batch.length;
    for (const fileHash of batch) maybeOrphaned.add(fileHash);
    if (batch.length < 1000) break;
  }
  const collect = async (fileHashes: string[]): Promise<void> => {
    const referenced = await referencedFiles(deps.sql, fileHashes);
    for (const fileHash of fileHashes) {
      // Checked again under the lock: an upload may have committed since.
      if (!referenced.has(fileHash) && (await deleteBlobIfUnreferenced(deps.sql, deps.blobs, fileHash))) report.blobs++;
    }
  };
  await collect([...maybeOrphaned]);
  let batch: string[] = [];
  for await (const blob of deps.blobs.list('nar/')) {
    const fileHash = parseNarUrl(blob.key);
    if (fileHash === undefined || blob.modified >= graceBefore || maybeOrphaned.has(fileHash)) continue;
    batch.push(fileHash);
    if (batch.length >= 1000) {
      await collect(batch);
      batch = [];
    }
  }
  await collect(batch);
  if (Object.values(report).some((n) => n > 0)) deps.log.info({ swept: report }, 'swept unfinished uploads and unreferenced NARs');
  return report;
}
