// worker.nar.partialTtlSecs: what a worker killed in the middle of a download leaves behind. kiln's
// worker fetches no NAR itself (Nix substitutes a build's inputs from the caches and keeps no
// partial file past its own process), so the option covers the downloads the worker does make:
// uploaded source tarballs (<baseDir>/tmp/source-*), open_pr scratch clones (<baseDir>/tmp/open-pr-*),
// restores of shared evaluation inputs (<baseDir>/tmp/input-*, docs/eval-cache.md) and anything under <baseDir>/nar-partial. Each is removed once nothing in it was written for the
// TTL; a live download writes as it goes, and no job runs anywhere near the one-day default.
import { lstat, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';

// roots-: worker/storeRoots.ts's scratch lists
const SWEPT_IN_TMP = /^(source-|open-pr-|input-|roots-)/;

/**
 * The newest modification time in a file or tree. Symlinks are never followed (a clone of a
 * hostile repository may hold one to `/`, or a loop): a link counts by its own time.
 */
async function lastWriteMs(path: string): Promise<number> {
  const st = await lstat(path);
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = st.mtimeMs;
  for (const entry of await readdir(path, { withFileTypes: true }).catch(() => [])) {
    const inner = await lastWriteMs(join(path, entry.name)).catch(() => null);
    if (inner !== null && inner > newest) newest = inner;
  }
  return newest;
}

/** The names in `dir`, a real directory; none when it is missing or a symlink (its target is not the worker's). */
async function entries(dir: string): Promise<string[]> {
  try {
    if (!(await lstat(dir)).isDirectory()) return [];
    return await readdir(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
}

/** Removes the abandoned downloads not written for `ttlMs` before `now`; returns their paths. */
export async function sweepPartialDownloads(baseDir: string, ttlMs: number, now: Date): Promise<string[]> {
  const candidates = [
    ...(await entries(join(baseDir, 'tmp'))).filter((name) => SWEPT_IN_TMP.test(name)).map((name) => join(baseDir, 'tmp', name)),
    ...(await entries(join(baseDir, 'nar-partial'))).map((name) => join(baseDir, 'nar-partial', name)),
  ];
  const removed: string[] = [];
  for (const path of candidates) {
    const written = await lastWriteMs(path).catch(() => null);
    if (written === null || now.getTime() - written < ttlMs) continue;
    await rm(path, { recursive: true, force: true });
    removed.push(path);
  }
  return removed;
}
