// A file's bytes as a serving thread sends them (docs/http.md, "Serving threads"): opened before the
// answer's status is chosen (a missing file is the main thread's 404 to word), then read in 1 MiB
// pieces into two buffers that take turns, the next read under way while the last piece is written,
// the buffers kept for the thread's next file. The filesystem blob store reads the same way
// (storage/blobs/filesystemBlobStore.ts); a thread does not load that store, because
// storage/index.ts brings the database and S3 clients along: seconds and ~75 MiB per thread.
import { open, type FileHandle } from 'node:fs/promises';

const PIECE_BYTES = 1 << 20;
/** Spare buffers kept per thread: 32 MiB, sixteen files in flight. */
const KEEP = 32;
const spare: Buffer[] = [];

export interface OpenedFile {
  size: number;
  /** The bytes [start, end): read it to the end or return() it; the file closes either way. */
  pieces(start: number, end: number): AsyncGenerator<Buffer, void, undefined>;
  /** Closes the file (again: harmless), for one whose pieces were never read (a HEAD request). */
  close(): void;
  /** The whole file in a buffer of its own (a small file the thread keeps in memory), then closed. */
  whole(): Promise<Buffer>;
}

/** A read that did not end within its time: storage stalled (review r7a-3). */
export class ReadStalled extends Error {
  constructor(readonly ms: number) {
    super(`the file was not read within ${ms} ms`);
    this.name = 'ReadStalled';
  }
}

/** `read`, or ReadStalled past `ms` (0: no limit); the read itself runs on, its result dropped. */
export function within<T>(read: Promise<T>, ms: number): Promise<T> {
  if (ms <= 0) return read;
  read.catch(() => undefined);
  let timer: NodeJS.Timeout | undefined;
  const stalled = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new ReadStalled(ms)), ms);
    timer.unref();
  });
  return Promise.race([read, stalled]).finally(() => clearTimeout(timer));
}

/** The regular file at `path`, or null when there is none. */
export async function openFile(path: string): Promise<OpenedFile | null> {
  let handle: FileHandle;
  try {
    handle = await open(path, 'r');
  } catch {
    return null;
  }
  const info = await handle.stat().catch(() => null);
  if (info === null || !info.isFile()) {
    await handle.close();
    return null;
  }
  let closed = false;
  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    await handle.close().catch(() => undefined);
  };
  const whole = async (): Promise<Buffer> => {
    try {
      return await fill(handle, Buffer.allocUnsafeSlow(info.size), 0, info.size); // not a slice of the shared pool: kept, it would hold the pool
    } finally {
      await close();
    }
  };
  return { size: info.size, pieces: (start, end) => pieces(handle, close, start, end), close: () => void close(), whole };
}

async function fill(handle: FileHandle, buffer: Buffer, at: number, length: number): Promise<Buffer> {
  for (let filled = 0; filled < length; ) {
    const { bytesRead } = await handle.read(buffer, filled, length - filled, at + filled);
    if (bytesRead === 0) throw new Error(`the file ended at byte ${at + filled}, before the ${length} bytes asked from ${at}`);
    filled += bytesRead;
  }
  return length === buffer.length ? buffer : buffer.subarray(0, length);
}

async function* pieces(handle: FileHandle, close: () => Promise<void>, start: number, end: number): AsyncGenerator<Buffer, void, undefined> {
  const buffers = [spare.pop() ?? Buffer.allocUnsafeSlow(PIECE_BYTES), spare.pop() ?? Buffer.allocUnsafeSlow(PIECE_BYTES)] as const;
  const readFrom = (at: number, turn: number): Promise<Buffer> | null => {
    if (at >= end) return null;
    const read = fill(handle, buffers[turn % 2]!, at, Math.min(PIECE_BYTES, end - at));
    read.catch(() => undefined); // failed while nobody awaits it yet: handled when awaited
    return read;
  };
  let turn = 0;
  let at = start;
  let next = readFrom(at, turn);
  try {
    while (next !== null) {
      const piece = await next;
      at += piece.length;
      next = readFrom(at, ++turn);
      yield piece;
    }
  } finally {
    await next?.catch(() => undefined);
    await close();
    for (const buffer of buffers) if (spare.length < KEEP) spare.push(buffer);
  }
}
