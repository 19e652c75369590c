// What a ranged GET really returned is what Content-Range says, not what was asked: S3-compatible
// servers differ (s3rver 3.7.1 reads `bytes=0-0` as `bytes=0-`, and serves `bytes 0-0/0` for an empty
// object where S3 answers 416). Cache clients must get exactly the bytes they asked for, so the
// answer is checked, cut down when the server sent more, and refused when it sent something else.
import type { Readable } from 'node:stream';
import { BlobRangeError, type BlobRange } from './blobRange.js';

export interface RangedBody {
  size: number;
  range: BlobRange;
  body: AsyncIterable<Uint8Array>;
}

/** `bytes 0-99/1234` → the range served and the whole size; null when it is not of that form. */
export function parseContentRange(header: string | undefined): { size: number; range: BlobRange } | null {
  const match = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(header ?? '');
  if (match === null) return null;
  return { size: Number(match[3]), range: { start: Number(match[1]), end: Number(match[2]) } };
}

/** The asked range of the blob `key` out of a ranged response, or a throw saying what the server did wrong. */
export function fitToRange(key: string, asked: BlobRange, contentRange: string | undefined, body: Readable): RangedBody {
  const served = parseContentRange(contentRange);
  if (served !== null && served.size === 0) throw new BlobRangeError(key, asked, 0);
  if (served === null || served.range.start !== asked.start) {
    throw new Error(`the S3 server answered a GET of ${key} for bytes=${asked.start}-${asked.end} with Content-Range ${String(contentRange)}`);
  }
  const end = Math.min(asked.end, served.size - 1);
  if (served.range.end < end) {
    throw new Error(`the S3 server sent bytes ${served.range.start}-${served.range.end} of ${key}, short of ${end}`);
  }
  const range = { start: asked.start, end };
  return { size: served.size, range, body: served.range.end === end ? body : firstBytes(body, end - asked.start + 1) };
}

async function* firstBytes(body: Readable, count: number): AsyncGenerator<Uint8Array> {
  let left = count;
  try {
    for await (const received of body) {
      const chunk: Uint8Array = received;
      if (chunk.byteLength >= left) {
        yield chunk.subarray(0, left);
        return;
      }
      left -= chunk.byteLength;
      yield chunk;
    }
  } finally {
    body.destroy();
  }
}
