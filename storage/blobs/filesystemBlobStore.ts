// Blobs as plain files under one root: key `nar/<hash>.nar.zst` is the file `<root>/nar/<hash>.nar.zst`.
// Keys map one to one onto paths, so sharding, if wanted, is a choice of key, not of this store.
import type { Dir } from 'node:fs';
import { lstat, open, opendir, unlink, type FileHandle } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { assertBlobKey, assertBlobPrefix, blobKeyProblem } from './blobKey.js';
import { assertRangeShape, clampRange, type BlobRange } from './blobRange.js';
import type { BlobEntry, BlobRead, BlobReadOptions, BlobSource, BlobStore } from './blobStore.js';
import { ensureDirectory, errorCode, isTemporaryName, moveDurably, writeDurably } from './durableFile.js';
import { BlobSizeError, assertSize, withExpectedSize } from './expectedSize.js';
import { mebibyteBuffers } from '../bufferPool.js';

// A path that is absent, or runs through a file where a directory would be, holds no blob.
const ABSENT = new Set(['ENOENT', 'ENOTDIR']);

interface WalkedFile {
  /** path relative to the root, '/'-separated */
  relative: string;
  path: string;
  temporary: boolean;
}

export class FilesystemBlobStore implements BlobStore {
  readonly backend = 'fs' as const;
  readonly root: string;

  constructor(root: string) {
    this.root = resolve(root);
  }

  private pathOf(key: string): string {
    assertBlobKey(key);
    return join(this.root, ...key.split('/'));
  }

  async put(key: string, source: BlobSource, size?: number): Promise<void> {
    const target = this.pathOf(key);
    assertSize(size);
    await ensureDirectory(dirname(target));
    if (typeof source !== 'string') return writeDurably(target, withExpectedSize(key, source, size));
    if (size !== undefined) {
      const actual = (await lstat(source)).size;
      if (actual !== size) throw new BlobSizeError(key, size, actual, true);
    }
    await moveDurably(source, target);
  }

  async get(key: string, range?: BlobRange, options: BlobReadOptions = {}): Promise<BlobRead | null> {
    const path = this.pathOf(key);
    if (range !== undefined) assertRangeShape(range);
    const opened = await openRegularFile(path);
    if (opened === null) return null;
    const { handle, size } = opened;
    let read: BlobRange | null;
    try {
      read = range === undefined ? null : clampRange(key, range, size);
    } catch (error) {
      await handle.close();
      throw error;
    }
    // The open handle keeps the bytes readable even if the blob is deleted or replaced meanwhile.
    const body = readChunks(key, handle, read === null ? 0 : read.start, read === null ? size : read.end + 1, options.reuseChunks === true);
    let started = false;
    return {
      size,
      range: read,
      body: { [Symbol.asyncIterator]: () => ((started = true), body) },
      // Never started: the generator's finally will not run, so the handle is closed here.
      cancel: () => void (started ? body.return(undefined) : handle.close()).catch(() => undefined),
    };
  }

  async stat(key: string): Promise<{ size: number } | null> {
    try {
      const info = await lstat(this.pathOf(key));
      return info.isFile() ? { size: info.size } : null;
    } catch (error) {
      if (ABSENT.has(errorCode(error) ?? '')) return null;
      throw error;
    }
  }

  // No directory fsync: a delete lost in a crash only brings back an orphan, which the sweeper removes again.
  async delete(key: string): Promise<void> {
    try {
      await unlink(this.pathOf(key));
    } catch (error) {
      if (!ABSENT.has(errorCode(error) ?? '')) throw error;
    }
  }

  async *list(prefix = ''): AsyncIterable<BlobEntry> {
    assertBlobPrefix(prefix);
    for await (const file of this.walk(prefix)) {
      if (file.temporary || !file.relative.startsWith(prefix) || blobKeyProblem(file.relative) !== undefined) continue;
      const info = await lstatOrNull(file.path);
      if (info?.isFile()) yield { key: file.relative, size: info.size, modified: info.mtime };
    }
  }

  async presignedUrl(key: string): Promise<string | null> {
    assertBlobKey(key);
    return null;
  }

  localPath(key: string): string {
    return this.pathOf(key);
  }

  async sweepPartial(olderThan: Date): Promise<number> {
    let removed = 0;
    for await (const file of this.walk('')) {
      if (!file.temporary) continue;
      const info = await lstatOrNull(file.path);
      if (info === null || info.mtime >= olderThan) continue;
      await unlink(file.path).catch((error: unknown) => {
        if (!ABSENT.has(errorCode(error) ?? '')) throw error;
      });
      removed++;
    }
    return removed;
  }

  async close(): Promise<void> {}

  /** Files under the directory part of `prefix`, descending only into directories that can match it. */
  private async *walk(prefix: string): AsyncGenerator<WalkedFile> {
    const slash = prefix.lastIndexOf('/');
    const base = slash < 0 ? '' : prefix.slice(0, slash);
    yield* walkDirectory(base === '' ? this.root : join(this.root, ...base.split('/')), base, prefix);
  }
}

async function* walkDirectory(dir: string, relative: string, prefix: string): AsyncGenerator<WalkedFile> {
  let entries: Dir;
  try {
    entries = await opendir(dir);
  } catch (error) {
    if (ABSENT.has(errorCode(error) ?? '')) return;
    throw error;
  }
  for await (const entry of entries) {
    const child = relative === '' ? entry.name : `${relative}/${entry.name}`;
    const path = join(dir, entry.name);
    if (entry.isFile()) {
      yield { relative: child, path, temporary: isTemporaryName(entry.name) };
    } else if (entry.isDirectory() && !entry.name.startsWith('.') && `${child}/`.startsWith(prefix.slice(0, child.length + 1))) {
      yield* walkDirectory(path, child, prefix);
    }
  }
}

/** Bytes per read: large reads mean few turns of the event loop per served megabyte. */
const READ_CHUNK = mebibyteBuffers.bufferBytes;

/**
 * The bytes [start, end) in READ_CHUNK pieces, the next read already under way while the caller
 * writes the last piece out. With `reuse`, two buffers take turns (the caller is done with a piece
 * when it asks for the next) and go back to the shared pool (bufferPool.ts) at the end.
 */
async function* readChunks(key: string, handle: FileHandle, start: number, end: number, reuse: boolean): AsyncGenerator<Buffer, void, undefined> {
  const owned: Buffer[] = [];
  const readAt = async (at: number, buffer: Buffer): Promise<Buffer> => {
    const length = Math.min(READ_CHUNK, end - at);
    let filled = 0;
    while (filled < length) {
      const { bytesRead } = await handle.read(buffer, filled, length - filled, at + filled);
      if (bytesRead === 0) throw new Error(`blob ${key} ended at byte ${at + filled}, before the ${end} its size promised (truncated while read?)`);
      filled += bytesRead;
    }
    return length === buffer.length ? buffer : buffer.subarray(0, length);
  };
  const ahead = (at: number, turn: number): Promise<Buffer> => {
    let buffer: Buffer;
    if (!reuse) buffer = Buffer.allocUnsafeSlow(Math.min(READ_CHUNK, end - at));
    else buffer = owned[turn % 2] ?? (owned[turn % 2] = mebibyteBuffers.take());
    const read = readAt(at, buffer);
    read.catch(() => undefined); // a read-ahead may fail while nobody awaits it yet: handled when awaited
    return read;
  };
  let turn = 0;
  let next: Promise<Buffer> | null = start < end ? ahead(start, turn) : null;
  try {
    for (let at = start; next !== null; ) {
      const chunk = await next;
      at += chunk.length;
      next = at < end ? ahead(at, ++turn) : null;
      yield chunk;
    }
  } finally {
    await next?.catch(() => undefined);
    await handle.close();
    for (const buffer of owned) mebibyteBuffers.give(buffer);
  }
}

async function openRegularFile(path: string): Promise<{ handle: FileHandle; size: number } | null> {
  let handle: FileHandle;
  try {
    handle = await open(path, 'r');
  } catch (error) {
    if (ABSENT.has(errorCode(error) ?? '')) return null;
    throw error;
  }
  try {
    const info = await handle.stat();
    // Opening a directory for reading succeeds on Linux; a key that names one still has no blob.
    if (info.isFile()) return { handle, size: info.size };
  } catch (error) {
    await handle.close();
    throw error;
  }
  await handle.close();
  return null;
}

async function lstatOrNull(path: string) {
  try {
    return await lstat(path);
  } catch (error) {
    if (ABSENT.has(errorCode(error) ?? '')) return null;
    throw error;
  }
}
