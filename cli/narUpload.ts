// One NAR into a cache by the chunked REST upload: PUT …/nars/{hash}/chunk?offset=N in slices
// of 32 MiB (the spec's chunk size, under the 100 MiB body cap of bundled proxies), then POST
// …/finalize with the narinfo. The server's count of staged bytes is the truth: a chunk at the
// wrong offset is answered 409 with Upload-Offset, and the upload goes on from there, so a run
// that failed half-way (or a chunk whose answer was lost) resumes instead of starting over.
// Chunks are cut into one buffer per upload and sent from it as they are (ApiClient copies no
// body), so an upload's memory is one chunk however large the NAR.
import { createReadStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { storePathHashPart, type NarUploadInfo, type NarUploadResult } from '../protocol/index.js';
import { isApiRequestError, type ApiClient, type ApiRequestError } from './apiClient.js';
import type { Progress } from './progressBar.js';

export const CHUNK_BYTES = 32 * 1024 * 1024;

export interface NarSource {
  /** the NAR's length in bytes (its NarSize) */
  size: number;
  /** the NAR's bytes from `offset` on */
  open(offset: number): AsyncIterable<Uint8Array>;
  /**
   * For a source that can seek (a file): up to `into.length` bytes from `position` on, read into
   * `into`; how many (0 at the end). uploadNar then reads each chunk straight into its buffer
   * rather than copying it out of `open`'s pieces.
   */
  read?(into: Uint8Array, position: number): Promise<number>;
}

/** A NAR file: read by position into the upload's buffer (`open` streams it, for other readers). */
export function narFileSource(path: string, size: number): NarSource {
  return {
    size,
    open: (offset) => createReadStream(path, { start: offset, highWaterMark: 1 << 20 }),
    async read(into, position) {
      // Opened per read (a chunk): no handle outlives the upload, whatever way it ends.
      const handle = await open(path, 'r');
      try {
        return (await handle.read(into, 0, into.length, position)).bytesRead;
      } finally {
        await handle.close();
      }
    },
  };
}

export interface NarUploadOptions {
  chunkBytes?: number;
  progress?: Progress;
  /** transport failures and 5xx answers retried per upload before giving up */
  retries?: number;
  /** waits between retries; tests pass a short one */
  backoffMs?: (attempt: number) => number;
}

/**
 * Slices of exactly `into.length` bytes (the last one shorter) out of a stream of arbitrary pieces,
 * all copied into `into` and yielded as views of it: a slice is valid only until the next one is
 * asked for (the generator then overwrites it), so a consumer that keeps one must copy it. One
 * buffer serves a whole upload however large, instead of a fresh chunk-sized one per chunk.
 */
export async function* chunked(source: AsyncIterable<Uint8Array>, into: Buffer): AsyncGenerator<Buffer> {
  const size = into.length;
  if (size === 0) throw new RangeError('chunked: the buffer has no room');
  let held = 0;
  for await (const piece of source) {
    for (let at = 0; at < piece.byteLength; ) {
      const n = Math.min(size - held, piece.byteLength - at);
      into.set(piece.subarray(at, at + n), held);
      held += n;
      at += n;
      if (held === size) {
        yield into;
        held = 0;
      }
    }
  }
  if (held > 0) yield into.subarray(0, held);
}

/** chunked()'s slices, and its contract, read by position from `offset` to `end`. */
async function* readChunks(read: (into: Uint8Array, position: number) => Promise<number>, end: number, offset: number, into: Buffer): AsyncGenerator<Buffer> {
  for (let at = offset; at < end; ) {
    const want = Math.min(into.length, end - at);
    let held = 0;
    while (held < want) {
      const n = await read(into.subarray(held, want), at + held);
      if (n === 0) break;
      held += n;
    }
    if (held > 0) yield into.subarray(0, held);
    // A source shorter than its size ends here, as a stream that ends early does.
    if (held < want) return;
    at += held;
  }
}

const stagedOf = (e: ApiRequestError): number | null => {
  const header = e.headers.get('upload-offset');
  return header !== null && /^\d+$/.test(header) ? Number(header) : null;
};

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function uploadNar(client: ApiClient, cache: string, info: NarUploadInfo, source: NarSource, opts: NarUploadOptions = {}): Promise<NarUploadResult> {
  const chunkBytes = opts.chunkBytes ?? CHUNK_BYTES;
  const retries = opts.retries ?? 4;
  const backoff = opts.backoffMs ?? ((attempt: number) => Math.min(30_000, 1000 * 2 ** attempt));
  const base = `/caches/${encodeURIComponent(cache)}/nars/${storePathHashPart(info.store_path)}`;
  let offset = 0;
  let failures = 0;
  let restartedOnce = false;
  /** bytes were staged before this run sent any: they may be of another build of the path */
  let inherited = false;
  let sentAny = false;
  // The one buffer every chunk of this upload is cut into. chunked()/readChunks() overwrite it when
  // asked for the next chunk, which happens only once the PUT of the last one has settled (client.call
  // returns when node:http is done with the body). A failure leaves the for-await, which ends that
  // generator (suspended at its yield) and its stream before a new one fills the same buffer from
  // the server's offset.
  const buffer = Buffer.allocUnsafe(Math.max(1, Math.min(chunkBytes, source.size)));

  /** After a transport failure nobody knows how far the last chunk got: ask. */
  const stagedNow = async (): Promise<number> => {
    try {
      return (await client.call<{ bytes_staged: number }>('GET', `${base}/upload`)).bytes_staged;
    } catch (e) {
      if (isApiRequestError(e) && e.status === 404) return 0;
      throw e;
    }
  };

  /** true to go on, false when the failure is the caller's to see. */
  const recover = async (e: unknown): Promise<boolean> => {
    if (isApiRequestError(e) && (e.code === 'offset_mismatch' || e.code === 'incomplete_upload')) {
      const staged = stagedOf(e);
      if (staged === null || staged > source.size || ++failures > retries + 4) return false;
      // Everything this side has is staged and the server still wants more: the narinfo is wrong.
      if (e.code === 'incomplete_upload' && staged >= source.size) return false;
      if (!sentAny && staged > 0) inherited = true;
      offset = staged;
      return true;
    }
    const transient = !isApiRequestError(e) || e.status >= 500 || e.code === 'upload_in_progress';
    if (!transient || ++failures > retries) return false;
    const retryAfter = isApiRequestError(e) ? Number(e.headers.get('retry-after')) : NaN;
    await sleep(Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : backoff(failures));
    offset = await stagedNow();
    if (!sentAny && offset > 0) inherited = true;
    return true;
  };

  for (;;) {
    try {
      if (offset < source.size) {
        const read = source.read?.bind(source);
        const chunks = read === undefined ? chunked(source.open(offset), buffer) : readChunks(read, source.size, offset, buffer);
        for await (const chunk of chunks) {
          const answer = await client.call<{ bytes_staged: number }>('PUT', `${base}/chunk`, { query: { offset }, bytes: chunk });
          offset = answer.bytes_staged;
          sentAny = true;
          opts.progress?.update(offset);
        }
      }
      const result = await client.call<NarUploadResult>('POST', `${base}/finalize`, { body: info });
      opts.progress?.finish();
      return result;
    } catch (e) {
      // Bytes staged by an earlier, different attempt (another build of the same path): start over once.
      if (isApiRequestError(e) && (e.code === 'nar_mismatch' || e.code === 'invalid_nar') && inherited && !restartedOnce) {
        restartedOnce = true;
        inherited = false;
        await client.call('DELETE', `${base}/upload`).catch(() => undefined);
        offset = 0;
        continue;
      }
      if (!(await recover(e))) throw e;
    }
  }
}
