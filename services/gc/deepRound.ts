// One deep round (docs/gc.md, "Deep rounds"): the slow consistency checks a pass skips. Rows
// against blob files (a row whose blob is gone loses its copies, outputs marked not cached), then
// the NAR storage's sweep: unreferenced blobs found by listing the store, cached paths no cache
// holds, stray staging files and partial uploads. A background round waits gc.deepPaceMs between
// units (a page of files); a requested one runs without pause.
import { performance } from 'node:perf_hooks';
import { missingBlobs, removeCopiesOfMissingBlob, storedFileHashes, type RemovedPath, type SweepReport } from '../../storage/index.js';
import { markManyOutputsNotCached } from '../caches/index.js';
import { emitSwept, settleRemoved, SweepTally } from './collectionPass.js';
import type { GcDeps } from './gcDeps.js';

const UNIT_FILES = 500;

export interface DeepResult {
  files_checked: number;
  missing_blobs: number;
  /** cache copies removed because their blob was missing */
  paths: number;
  sweep: SweepReport;
  units: number;
  duration_ms: number;
}

const waitMs = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

export async function runDeepRound(deps: GcDeps, requested: boolean): Promise<DeepResult> {
  const t0 = performance.now();
  const pause = deps.pause ?? waitMs;
  const paceMs = requested ? 0 : deps.config['gc.deepPaceMs'];
  await deps.events.transaction(async (_tx, emit) => emit('gc.deep_started', {}));
  const tally = new SweepTally();
  let filesChecked = 0;
  let missing = 0;
  let units = 0;
  for (let after: string | null = null; ;) {
    const page = await storedFileHashes(deps.sql, after, UNIT_FILES);
    if (page.length === 0) break;
    after = page[page.length - 1]!;
    filesChecked += page.length;
    units++;
    for (const fileHash of await missingBlobs(deps.nars.blobs, page)) {
      const removed: RemovedPath[] = await removeCopiesOfMissingBlob(deps.sql, deps.nars.blobs, fileHash, async (tx, gone) => {
        await markManyOutputsNotCached(tx, gone.filter((p) => p.lastCopy));
      });
      if (removed.length > 0) missing++;
      tally.add(removed, 'missing_blob');
      await settleRemoved(deps, removed);
    }
    await deps.crashPoints?.('gc.deep.unitChecked');
    if (paceMs > 0) await pause(paceMs);
  }
  const sweep = await deps.nars.sweep(deps.clock.now());
  units++;
  const sweeps = await tally.named(deps);
  await emitSwept(deps, sweeps);
  const paths = sweeps.reduce((n, s) => n + s.paths, 0);
  const durationMs = Math.round(performance.now() - t0);
  await deps.events.transaction(async (_tx, emit) => emit('gc.deep_finished', {
    paths: paths + sweep.cachedPaths, bytes: sweeps.reduce((n, s) => n + s.bytes, 0), duration_ms: durationMs,
    missing_blobs: missing, blobs: sweep.blobs, staged_uploads: sweep.stagedUploads,
  }));
  return { files_checked: filesChecked, missing_blobs: missing, paths, sweep, units, duration_ms: durationMs };
}
