// CPU pool tasks of the parallel ingest of an uncompressed NAR (storage/cpuWorker.ts runs them):
// one zstd frame of a byte range, handed back to the main thread without a copy (frameJoin.ts
// writes it into the stored file), and the check pass (parse, NarHash, listing, references) that
// needs no compression at all.
import { createReadStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { move } from 'piscina';
import { hashNar, isNarError, NarListingBuilder, renderNarListing } from '../../protocol/index.js';
import { compressFrameInto } from './frameInto.js';
import { compressFrame, FRAME_BYTES } from './narFrames.js';
import { ReferenceScanner } from './referenceScanner.js';

const READ = { highWaterMark: 1 << 20 };

export interface CompressFrameInput {
  source: string;
  /** NAR bytes [start, end) */
  start: number;
  end: number;
  zstdLevel: number;
  /** shared memory to write the compressed bytes into (frameSlots.ts) */
  output?: SharedArrayBuffer;
}

/**
 * The buffer a pool thread reads frames into, reused: a pool thread runs one task at a time (piscina's
 * default), and a fresh 16 MiB buffer per frame was garbage to collect.
 */
let frameBuffer: Buffer | null = null;

/**
 * The frame's length once its compressed bytes are in `input.output`; without it, the bytes,
 * transferred (not cloned) to the thread that asked.
 */
export async function compressNarFrame(input: CompressFrameInput): Promise<number | Uint8Array> {
  const length = input.end - input.start;
  const reusable = frameBuffer !== null && frameBuffer.length >= length ? frameBuffer : Buffer.allocUnsafe(Math.max(length, FRAME_BYTES));
  frameBuffer = null; // taken: should two tasks ever overlap here, the other one allocates its own
  const frame = reusable.subarray(0, length);
  const source = await open(input.source, 'r');
  let filled = 0;
  try {
    while (filled < frame.length) {
      const { bytesRead } = await source.read(frame, filled, frame.length - filled, input.start + filled);
      if (bytesRead === 0) throw new Error(`${input.source} ends at byte ${input.start + filled}, inside the frame [${input.start}, ${input.end})`);
      filled += bytesRead;
    }
  } finally {
    await source.close();
  }
  try {
    if (input.output !== undefined) return compressFrameInto(frame, input.zstdLevel, new Uint8Array(input.output));
    return transferable(compressFrame(frame, input.zstdLevel));
  } finally {
    frameBuffer = reusable;
  }
}

/**
 * Bytes marked for transfer, with the buffer they are a view of. Only a buffer of their own may go:
 * a small Buffer shares Node's allocation pool with others, so it is copied into its own first.
 * (A frame is a view of zstd's worst-case output buffer; its unused tail was never written, so
 * it costs no memory.)
 */
function transferable(bytes: Buffer): Uint8Array {
  const own = bytes.buffer.byteLength > Buffer.poolSize ? bytes : new Uint8Array(bytes);
  // piscina unwraps the marker and sends the bytes themselves; the caller receives a Uint8Array.
  return move(own) as unknown as Uint8Array;
}

export interface ScanReferencesInput {
  /** an uncompressed staged NAR */
  source: string;
  narSize: number;
  references: string[];
}

/** Which declared references do not occur in the first `narSize` bytes (when the rest of the check pass ran as chunks arrived). */
export async function scanStagedReferences(input: ScanReferencesInput): Promise<{ missingReferences: string[] }> {
  const scanner = new ReferenceScanner(input.references);
  const file = createReadStream(input.source, { ...READ, end: input.narSize - 1 });
  try {
    for await (const chunk of file) {
      scanner.push(chunk as Buffer);
      if (scanner.missing.length === 0) break;
    }
  } finally {
    file.destroy();
  }
  return { missingReferences: scanner.missing };
}

export interface VerifyInput {
  /** an uncompressed staged NAR */
  source: string;
  narSize: number;
  references: string[];
}

export type VerifyOutput =
  | { ok: true; narHash: string; narSize: number; listing: string; missingReferences: string[] }
  | { ok: false; field: 'nar' | 'NarSize'; reason: string };

/** Parse, NarHash, listing and references of an uncompressed NAR, reading exactly `narSize` bytes' worth. */
export async function verifyStagedNar(input: VerifyInput): Promise<VerifyOutput> {
  const scanner = new ReferenceScanner(input.references);
  const listing = new NarListingBuilder();
  const file = createReadStream(input.source, READ);
  const scanned = (async function* () {
    for await (const chunk of file) {
      scanner.push(chunk as Buffer);
      yield chunk as Buffer;
    }
  })();
  try {
    const digest = await hashNar(scanned, { maxNarSize: input.narSize }, listing);
    return { ok: true, ...digest, listing: renderNarListing(listing.listing), missingReferences: scanner.missing };
  } catch (e) {
    return narFault(e, input.narSize);
  } finally {
    file.destroy();
  }
}

/** The upload's fault a check pass ran into (the NAR's, or longer than its NarSize); anything else is thrown on. */
export function narFault(e: unknown, narSize: number): { ok: false; field: 'nar' | 'NarSize'; reason: string } {
  if (!isNarError(e)) throw e;
  if (e.offset === narSize && /larger than the limit/.test(e.reason)) {
    return { ok: false, field: 'NarSize', reason: `the NAR is longer than the announced ${narSize} bytes` };
  }
  return { ok: false, field: 'nar', reason: e.message };
}
