// File operations that survive a crash at any instant: data is written to a temporary name in the
// target's own directory, fsynced, renamed over the final name (atomic within one filesystem), and
// the directory is fsynced so the rename itself is on disk before anyone records the blob.
import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, rename, unlink } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';

/** Temporary files start with a dot, which no blob key segment does, so they never collide or get listed. */
export const TEMPORARY_PREFIX = '.partial-';

export function isTemporaryName(name: string): boolean {
  return name.startsWith(TEMPORARY_PREFIX);
}

function temporaryBeside(target: string): string {
  return join(dirname(target), `${TEMPORARY_PREFIX}${randomBytes(8).toString('hex')}`);
}

export function errorCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null || !('code' in error)) return undefined;
  return typeof error.code === 'string' ? error.code : undefined;
}

export async function fsyncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** `mkdir -p` whose new directories survive a crash: the parent of each one it creates is fsynced. */
export async function ensureDirectory(dir: string): Promise<void> {
  const target = resolve(dir);
  const first = await mkdir(target, { recursive: true, mode: 0o700 });
  if (first === undefined) return;
  const created = resolve(first);
  for (let made = target; ; made = dirname(made)) {
    await fsyncDirectory(dirname(made));
    if (made === created || dirname(made) === made) return;
  }
}

/** Writes `source` to `target` through a temporary file; on failure nothing is left behind. */
export async function writeDurably(target: string, source: AsyncIterable<Uint8Array>): Promise<void> {
  const temporary = temporaryBeside(target);
  try {
    const handle = await open(temporary, 'wx', 0o600);
    try {
      await handle.writeFile(source);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temporary, target);
  } catch (error) {
    await unlink(temporary).catch(() => undefined);
    throw error;
  }
  await fsyncDirectory(dirname(target));
}

/**
 * Moves a finished local file to `target`: a rename when both are on one filesystem (O(1)), else a
 * durable copy and then removal of the original. The file is fsynced first because whoever wrote it
 * may not have, and the rename must not make a name visible before its data is on disk.
 */
export async function moveDurably(file: string, target: string): Promise<void> {
  const handle = await open(file, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await rename(file, target);
  } catch (error) {
    if (errorCode(error) !== 'EXDEV') throw error;
    await writeDurably(target, createReadStream(file));
    await unlink(file);
    return;
  }
  await fsyncDirectory(dirname(target));
}
