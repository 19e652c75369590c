// Who may read what kiln keeps under baseDir. The embedded PostgreSQL, running unprivileged when
// kiln is root, needs search permission (o+x) on baseDir to reach its data, so baseDir itself
// cannot be the barrier: every entry in it other than PostgreSQL's own directory is owner-only
// (directories 0700, files 0600). Entries made before this rule existed are tightened at start;
// entries inside them need no pass of their own, since nobody else can traverse their parent.
import { chmod, lstat, mkdir, readdir } from 'node:fs/promises';
import { join } from 'node:path';

/** The directory the embedded PostgreSQL owns and keeps 0700 under its own account (storage/db/local). */
const POSTGRES_DIR = 'postgres';

/** The directories a server makes under baseDir, made owner-only up front rather than on first use. */
export const SERVER_PRIVATE_DIRS = ['blobs', 'staging'] as const;

/** Creates baseDir (0700 when new) and the server's directories, and takes group and other bits off every entry but PostgreSQL's. Returns the entries it changed. */
export async function secureBaseDir(baseDir: string): Promise<string[]> {
  await mkdir(baseDir, { recursive: true, mode: 0o700 });
  for (const name of SERVER_PRIVATE_DIRS) await mkdir(join(baseDir, name), { mode: 0o700 }).catch(ignoreExists);
  const changed: string[] = [];
  for (const entry of await readdir(baseDir, { withFileTypes: true })) {
    if (entry.name === POSTGRES_DIR || entry.isSymbolicLink()) continue;
    const path = join(baseDir, entry.name);
    const mode = (await lstat(path)).mode & 0o7777;
    if ((mode & 0o077) === 0) continue;
    await chmod(path, mode & 0o7700);
    changed.push(path);
  }
  return changed;
}

function ignoreExists(e: unknown): void {
  if ((e as { code?: string }).code !== 'EEXIST') throw e;
}
