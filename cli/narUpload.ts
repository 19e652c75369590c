// One NAR into a cache by the chunked REST upload: PUT …/nars/{hash}/chunk?offset=N in slices
// of 32 MiB (the spec's chunk size, under the 100 MiB body cap of bundled proxies), then POST
// …/finalize with the narinfo. The server's count of staged bytes is the truth: a chunk at the
// wrong offset is answered 409 with Upload-Offset, and the upload goes on from there, so a run
// that failed half-way (or a chunk whose answer was lost) resumes instead of starting over.
import type { NarUploadInfo, NarUploadResult } from '../protocol/index.js';
import { isApiRequestError, type ApiClient, type ApiRequestError } from './apiClient.js';
import type { Progress } from './progressBar.js';

export const CHUNK_BYTES = 32 * 1024 * 1024;

export interface NarSource {
  /** the NAR's length in bytes (its NarSize) */
  size: number;
  /** the NAR's bytes from `offset` on */
  open(offset: number): AsyncIterable<Uint8Array>;
}

export interface NarUploadOptions {
  chunkBytes?: number;
  progress?: Progress;
  /** transport failures and 5xx answers retried per upload before giving up */
  retries?: number;
  /** waits between retries; tests pass a short one */
  backoffMs?: (attempt: number) => number;
}

/** Slices of exactly `size` bytes (the last one shorter) out of a stream of arbitrary pieces. */
export async function* chunked(source: AsyncIterable<Uint8Array>, size: number): AsyncGenerator<Buffer> {
  let pieces: Buffer[] = [];
  let held = 0;
  for await (const piece of source) {
    pieces.push(Buffer.from(piece.buffer, piece.byteOffset, piece.byteLength));
    held += piece.byteLength;
    while (held >= size) {
      const all = Buffer.concat(pieces, held);
      yield all.subarray(0, size);
      pieces = [all.subarray(size)];
      held -= size;
    }
  }
  if (held > 0) yield Buffer.concat(pieces, held);
}

const stagedOf = (e: ApiRequestError): number | null => {
  const header = e.headers.get('upload-offset');
  return header !== null && /^\d+$/.test(header) ? Number(header) : null;
};

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export const hashPartOf = (storePath: string): string => storePath.slice(storePath.lastIndexOf('/') + 1, storePath.lastIndexOf('/') + 33);

export async function uploadNar(client: ApiClient, cache: string, info: NarUploadInfo, source: NarSource, opts: NarUploadOptions = {}): Promise<NarUploadResult> {
  const chunkBytes = opts.chunkBytes ?? CHUNK_BYTES;
  const retries = opts.retries ?? 4;
  const backoff = opts.backoffMs ?? ((attempt: number) => Math.min(30_000, 1000 * 2 ** attempt));
  const base = `/caches/${encodeURIComponent(cache)}/nars/${hashPartOf(info.store_path)}`;
  let offset = 0;
  let failures = 0;
  let restartedOnce = false;
  /** bytes were staged before this run sent any: they may be of another build of the path */
  let inherited = false;
  let sentAny = false;

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
        for await (const chunk of chunked(source.open(offset), chunkBytes)) {
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
