// HTTP towards upstream caches: small texts (narinfos, logs) read whole with a size cap, a HEAD for
// a NAR file's size, the file's bytes (or one range of them) streamed on first read, and spooling
// to a local file for upstreams that do not say how long a file is (kiln always sends
// Content-Length, so it must know it first). Every request has a deadline for its response head.
import { createWriteStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import type { OutboundFetch, OutboundFetchInit } from '../../storage/index.js';

/** fetch() towards upstreams: storage's outboundFetch, which connects only where outbound.allowedNetworks lets it */
export type FetchFunction = OutboundFetch;

export interface ByteRange {
  /** inclusive */
  start: number;
  /** inclusive */
  end: number;
}

const USER_AGENT = 'kiln (upstream cache client)';

/** fetch() whose response head must come within `timeoutMs`; the body may take as long as it takes. */
export async function fetchWithHeadDeadline(fetchFn: FetchFunction, url: string, init: OutboundFetchInit, timeoutMs: number): Promise<Response> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new Error(`no answer from ${url} within ${timeoutMs} ms`)), timeoutMs);
  try {
    return await fetchFn(url, { ...init, signal: controller.signal, headers: { 'User-Agent': USER_AGENT, ...init.headers }, redirect: 'follow' });
  } finally {
    clearTimeout(timer);
  }
}

async function* chunksOf(response: Response): AsyncGenerator<Uint8Array> {
  if (response.body === null) return;
  yield* response.body as unknown as AsyncIterable<Uint8Array>;
}

/** The body of a 200 answer as text, at most `limit` bytes; null for any other status. */
export async function fetchSmallText(fetchFn: FetchFunction, url: string, limit: number, timeoutMs: number): Promise<string | null> {
  const bytes = await fetchSmallBytes(fetchFn, url, limit, timeoutMs);
  return bytes === null ? null : bytes.body.toString('utf8');
}

export async function fetchSmallBytes(fetchFn: FetchFunction, url: string, limit: number, timeoutMs: number): Promise<{ body: Buffer; headers: Headers } | null> {
  const response = await fetchWithHeadDeadline(fetchFn, url, {}, timeoutMs);
  if (response.status !== 200) {
    await response.body?.cancel();
    return null;
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of chunksOf(response)) {
    size += chunk.byteLength;
    if (size > limit) throw new Error(`${url} is larger than the ${limit} bytes expected of it`);
    chunks.push(chunk);
  }
  return { body: Buffer.concat(chunks), headers: response.headers };
}

/** The size of a file the upstream has (null when it does not say), or null when it has none. */
export async function headUpstreamFile(fetchFn: FetchFunction, url: string, timeoutMs: number): Promise<{ size: number | null } | null> {
  const response = await fetchWithHeadDeadline(fetchFn, url, { method: 'HEAD' }, timeoutMs);
  await response.body?.cancel();
  if (response.status !== 200) return null;
  const length = response.headers.get('content-length');
  const size = length !== null && /^\d{1,16}$/.test(length) ? Number(length) : null;
  return { size };
}

/**
 * The bytes of `url` (or of `range`), requested when the first chunk is read, so that a HEAD
 * answered from the size alone never opens a download. An upstream that ignores Range gets its
 * whole answer cut down to the range here.
 */
export function lazyUpstreamBody(fetchFn: FetchFunction, url: string, range: ByteRange | null, timeoutMs: number): AsyncIterable<Uint8Array> {
  return {
    async *[Symbol.asyncIterator]() {
      const headers: Record<string, string> = range === null ? {} : { Range: `bytes=${range.start}-${range.end}` };
      const response = await fetchWithHeadDeadline(fetchFn, url, { headers }, timeoutMs);
      if (response.status === 206 && range !== null) {
        yield* chunksOf(response);
        return;
      }
      if (response.status !== 200) {
        await response.body?.cancel();
        throw new Error(`${url} answered ${response.status} after it was found`);
      }
      if (range === null) {
        yield* chunksOf(response);
        return;
      }
      let position = 0;
      for await (const chunk of chunksOf(response)) {
        const from = Math.max(0, range.start - position);
        const to = Math.min(chunk.byteLength, range.end + 1 - position);
        position += chunk.byteLength;
        if (to > from) yield chunk.subarray(from, to);
        if (position > range.end) return;
      }
    },
  };
}

/** Downloads a 200 answer into `file`; its length, or null when the upstream has no such file. */
export async function spoolUpstreamFile(fetchFn: FetchFunction, url: string, file: string, limit: number, timeoutMs: number): Promise<number | null> {
  const response = await fetchWithHeadDeadline(fetchFn, url, {}, timeoutMs);
  if (response.status !== 200 || response.body === null) {
    await response.body?.cancel();
    return null;
  }
  await mkdir(dirname(file), { recursive: true });
  let size = 0;
  const counted = async function* () {
    for await (const chunk of chunksOf(response)) {
      size += chunk.byteLength;
      if (size > limit) throw new Error(`${url} is larger than the ${limit} bytes a NAR may have (nar.maxUploadSize)`);
      yield chunk;
    }
  };
  try {
    await pipeline(Readable.from(counted()), createWriteStream(file));
  } catch (e) {
    await rm(file, { force: true });
    throw e;
  }
  return size;
}
