// The worker's directories are owner-only: clones hold tenants' git history and tmp holds their
// evaluation scratch, so no other local account may read them. New directories are made 0700; at
// start every entry of worker.baseDir loses its group and other bits (clones made by earlier
// versions were 0755 with 0644 files), so nothing below them is reachable by others either.
import { chmod, lstat, mkdir, readdir } from 'node:fs/promises';
import { join } from 'node:path';

/** The directories jobs write in, made up front. */
export const WORKER_PRIVATE_DIRS = ['repos', 'tmp'] as const;

async function ownerOnly(path: string): Promise<boolean> {
  const mode = (await lstat(path)).mode & 0o7777;
  if ((mode & 0o077) === 0) return false;
  await chmod(path, mode & 0o7700);
  return true;
}

/** `mkdir -p` that leaves `path` itself owner-only, even when it existed. */
export async function ensurePrivateDirectory(path: string): Promise<void> {
  await mkdir(path, { recursive: true, mode: 0o700 });
  await ownerOnly(path);
}

/** Creates baseDir (0700 when new) and the job directories; returns the entries it had to tighten. */
export async function secureWorkerBaseDir(baseDir: string): Promise<string[]> {
  await mkdir(baseDir, { recursive: true, mode: 0o700 });
  for (const name of WORKER_PRIVATE_DIRS) await mkdir(join(baseDir, name), { recursive: true, mode: 0o700 });
  const changed: string[] = [];
  for (const entry of await readdir(baseDir, { withFileTypes: true })) {
    if (entry.isSymbolicLink()) continue;
    const path = join(baseDir, entry.name);
    if (await ownerOnly(path)) changed.push(path);
  }
  return changed;
}
