// The worker's side of the shared evaluation cache (worker.eval.cache.dir, worker.eval.cache.share;
// docs/worker.md, "The shared evaluation cache"). Each project's evaluations run with their own Nix
// cache directory, XDG_CACHE_HOME=<dir>/<project>: its eval cache and fetcher cache are that
// project's alone on this worker, so what an evaluation writes there is the project's to upload.
// Before evaluating, the blob the server offered (the project's own, for this commit) is installed
// unless the worker has the file already; after a successful evaluation the eval-cache files Nix
// wrote during it go to the server, gzipped, when they fit in one message.
import { mkdir, readdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gunzip, gzip } from 'node:zlib';
import { EVAL_CACHE_MAX_BLOB_BYTES } from '../protocol/index.js';

const gzipAsync = promisify(gzip);
const gunzipAsync = promisify(gunzip);
/** Unpacked, an offered cache may be at most this large (a gzip bomb stops here). */
const MAX_UNPACKED_BYTES = 512 * 1024 * 1024;
const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1');
const CACHE_DIR = /^eval-cache-v([0-9]{1,3})$/;
const CACHE_FILE = /^([0-9a-f]{64})\.sqlite$/;
const NAME = /^v([0-9]{1,3})-([0-9a-f]{64})$/;

/** The project's Nix cache directory (its evaluations' XDG_CACHE_HOME), made owner-only. */
export async function projectCacheHome(dir: string, projectId: string): Promise<string> {
  const home = join(dir, projectId);
  await mkdir(home, { recursive: true, mode: 0o700 });
  return home;
}

/** Where Nix keeps the eval cache named `name` (`v<N>-<fingerprint>`) under `home`; null for a malformed name. */
export function evalCacheFile(home: string, name: string): string | null {
  const match = NAME.exec(name);
  return match ? join(home, 'nix', `eval-cache-v${match[1]}`, `${match[2]}.sqlite`) : null;
}

export type InstallOutcome = 'installed' | 'kept' | 'refused';

/**
 * Writes the offered cache in place unless a file of that name exists (the worker's own is at least
 * as complete). What is not a gzip of an SQLite database, or unpacks beyond the bound, is refused:
 * Nix would fail the evaluation on a broken cache file.
 */
export async function installOffered(home: string, offered: { fingerprint: string; data: Uint8Array }): Promise<InstallOutcome> {
  const file = evalCacheFile(home, offered.fingerprint);
  if (file === null) return 'refused';
  if (await stat(file).then(() => true, () => false)) return 'kept';
  let unpacked: Buffer;
  try {
    unpacked = await gunzipAsync(offered.data, { maxOutputLength: MAX_UNPACKED_BYTES });
  } catch {
    return 'refused';
  }
  if (!unpacked.subarray(0, SQLITE_HEADER.length).equals(SQLITE_HEADER)) return 'refused';
  await mkdir(join(file, '..'), { recursive: true, mode: 0o700 });
  const partial = `${file}.kiln-partial`;
  await writeFile(partial, unpacked, { mode: 0o600 });
  await rename(partial, file);
  return 'installed';
}

export interface CacheUpload {
  fingerprint: string;
  data: Buffer;
}

/**
 * The eval-cache files under `home` written since `sinceMs`, gzipped, those over
 * EVAL_CACHE_MAX_BLOB_BYTES left out (counted in `tooLarge`).
 */
export async function changedCaches(home: string, sinceMs: number): Promise<{ uploads: CacheUpload[]; tooLarge: number }> {
  const uploads: CacheUpload[] = [];
  let tooLarge = 0;
  const nixDir = join(home, 'nix');
  const dirs = await readdir(nixDir).catch(() => [] as string[]);
  for (const dir of dirs) {
    const version = CACHE_DIR.exec(dir)?.[1];
    if (version === undefined) continue;
    for (const entry of await readdir(join(nixDir, dir)).catch(() => [] as string[])) {
      const fingerprint = CACHE_FILE.exec(entry)?.[1];
      if (fingerprint === undefined) continue;
      const path = join(nixDir, dir, entry);
      const info = await stat(path).catch(() => null);
      if (!info?.isFile() || info.mtimeMs < sinceMs) continue;
      const data = await gzipAsync(await readFile(path));
      if (data.byteLength > EVAL_CACHE_MAX_BLOB_BYTES) tooLarge += 1;
      else uploads.push({ fingerprint: `v${version}-${fingerprint}`, data });
    }
  }
  return { uploads, tooLarge };
}
