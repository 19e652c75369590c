// Test content for blob stores: deterministic bytes made on the fly, so a 20 MiB blob is never held
// whole by the test either, and readers that hash and measure what comes back.
import { createHash } from 'node:crypto';

/** The byte at `offset` of the standard test pattern (different for each seed). */
function patternByte(offset: number, seed: number): number {
  return (Math.imul(offset + seed, 2654435761) >>> 24) & 0xff;
}

export function pattern(offset: number, length: number, seed = 0): Buffer {
  const buffer = Buffer.allocUnsafe(length);
  for (let i = 0; i < length; i++) buffer[i] = patternByte(offset + i, seed);
  return buffer;
}

/** `size` bytes of the pattern in chunks of `chunk` bytes; `onChunk` sees the offset reached after each. */
export async function* patternSource(
  size: number,
  { seed = 0, chunk = 64 * 1024, onChunk }: { seed?: number; chunk?: number; onChunk?: (offset: number) => Promise<void> | void } = {},
): AsyncGenerator<Uint8Array> {
  for (let offset = 0; offset < size; offset += chunk) {
    yield pattern(offset, Math.min(chunk, size - offset), seed);
    await onChunk?.(Math.min(offset + chunk, size));
  }
}

export async function* chunks(...parts: (string | Uint8Array)[]): AsyncGenerator<Uint8Array> {
  for (const part of parts) yield typeof part === 'string' ? Buffer.from(part) : part;
}

/** Yields `parts`, then fails the way a dropped upload connection would. */
export async function* failingAfter(error: Error, ...parts: (string | Uint8Array)[]): AsyncGenerator<Uint8Array> {
  yield* chunks(...parts);
  throw error;
}

export async function readAll(body: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of body) parts.push(Buffer.from(part));
  return Buffer.concat(parts);
}

export interface Digest {
  sha256: string;
  bytes: number;
  chunks: number;
  largestChunk: number;
}

export async function digest(body: AsyncIterable<Uint8Array>): Promise<Digest> {
  const hash = createHash('sha256');
  const result = { bytes: 0, chunks: 0, largestChunk: 0 };
  for await (const part of body) {
    hash.update(part);
    result.bytes += part.byteLength;
    result.chunks++;
    result.largestChunk = Math.max(result.largestChunk, part.byteLength);
  }
  return { sha256: hash.digest('hex'), ...result };
}
