// Writing staged bytes. A staged file counts only up to the length its row records: an append
// first cuts the file back to that length (a chunk a crash left half-written is dropped), then
// writes. Appends are not fsynced: a killed process loses nothing the kernel has, and after a power
// cut the worst case is a staged file shorter than its row says, which finalize refuses (the upload
// starts over). Nothing unverified is ever stored: finalize checks every byte, and the stored blob
// is fsynced. (An fsync per 32 MiB chunk measured 50-90 ms here, which the client waits for.)
import { constants } from 'node:fs';
import { mkdir, open, rm, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import { UploadProblem } from './uploadProblem.js';

/** Received pieces are gathered up to this many bytes per write: one thread-pool trip per MiB, not per network read. */
const WRITE_BATCH = 1 << 20;
/** IOV_MAX on Linux: a writev of more pieces is split anyway. */
const MAX_PIECES = 1024;

/**
 * A body whose pieces are memory it reuses says so (http/body.ts BodyStream): each piece is then
 * written before the next is asked for.
 */
export type StagedBody = AsyncIterable<Uint8Array> & { readonly reusesPieces?: boolean };

async function writeAll(handle: FileHandle, body: StagedBody, start: number, limit: number, what: string): Promise<number> {
  const transient = body.reusesPieces === true;
  let position = start;
  let pending: Uint8Array[] = [];
  let pendingBytes = 0;
  const flush = async () => {
    let buffers = pending;
    let at = position;
    pending = [];
    while (buffers.length > 0) {
      const { bytesWritten } = await handle.writev(buffers, at);
      if (bytesWritten === 0) throw new Error(`writing ${what} made no progress at byte ${at}`);
      at += bytesWritten;
      buffers = remainderAfter(buffers, bytesWritten);
    }
    position += pendingBytes;
    pendingBytes = 0;
  };
  for await (const chunk of body) {
    if (position + pendingBytes + chunk.byteLength > limit) {
      throw new UploadProblem('upload_too_large', `${what} exceeds the limit of ${limit} bytes (nar.maxUploadSize)`);
    }
    pending.push(chunk);
    pendingBytes += chunk.byteLength;
    if (pendingBytes >= WRITE_BATCH || pending.length >= MAX_PIECES || transient) await flush();
  }
  await flush();
  return position;
}

/** What of `buffers` is left once `written` bytes of them went out (a short writev). */
function remainderAfter(buffers: Uint8Array[], written: number): Uint8Array[] {
  let skip = written;
  let index = 0;
  while (index < buffers.length && skip >= buffers[index]!.byteLength) skip -= buffers[index++]!.byteLength;
  const rest = buffers.slice(index);
  if (rest.length > 0 && skip > 0) rest[0] = rest[0]!.subarray(skip);
  return rest;
}

/**
 * Appends `body` at `offset` (the row's count); the new length. On any failure the file
 * is cut back to `offset`, so nothing of a failed chunk counts or lingers.
 */
export async function appendStagedBytes(path: string, offset: number, body: StagedBody, limit: number): Promise<number> {
  await mkdir(dirname(path), { recursive: true });
  const handle = await open(path, constants.O_RDWR | constants.O_CREAT, 0o600);
  try {
    await handle.truncate(offset);
    try {
      return await writeAll(handle, body, offset, limit, 'the upload');
    } catch (e) {
      await handle.truncate(offset).catch(() => undefined);
      throw e;
    }
  } finally {
    await handle.close();
  }
}

/** Writes a whole new file from `body`; its length. A failed write leaves no file. */
export async function writeStagedFile(path: string, body: StagedBody, limit: number): Promise<number> {
  await mkdir(dirname(path), { recursive: true });
  const handle = await open(path, 'w', 0o600);
  let complete = false;
  try {
    const length = await writeAll(handle, body, 0, limit, 'the NAR file');
    complete = true;
    return length;
  } finally {
    await handle.close();
    if (!complete) await rm(path, { force: true });
  }
}
