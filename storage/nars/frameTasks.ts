// CPU pool tasks of the parallel ingest of an uncompressed NAR (storage/cpuWorker.ts runs them):
// one zstd frame of a byte range, the frames joined into the stored file with its FileHash, and
// the check pass (parse, NarHash, listing, references) that needs no compression at all.
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, rename, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { hashNar, isNarError, NarListingBuilder, renderNarListing, sha256Nix32 } from '../../protocol/index.js';
import { compressFrame, FRAME_BYTES } from './narFrames.js';
import { ReferenceScanner } from './referenceScanner.js';

const READ = { highWaterMark: 1 << 20 };

export interface CompressFrameInput {
  source: string;
  /** NAR bytes [start, end) */
  start: number;
  end: number;
  /** written under a temporary name and renamed, so a frame file that exists is complete */
  output: string;
  zstdLevel: number;
}

/**
 * The buffer a pool thread reads frames into, reused: a pool thread runs one task at a time (piscina's
 * default), and a fresh 16 MiB buffer per frame was garbage to collect.
 */
let frameBuffer: Buffer | null = null;

export async function compressNarFrame(input: CompressFrameInput): Promise<{ size: number }> {
  await mkdir(dirname(input.output), { recursive: true });
  const length = input.end - input.start;
  const reusable = frameBuffer !== null && frameBuffer.length >= length ? frameBuffer : Buffer.allocUnsafe(Math.max(length, FRAME_BYTES));
  frameBuffer = null; // taken: should two tasks ever overlap here, the other one allocates its own
  const frame = reusable.subarray(0, length);
  const source = await open(input.source, 'r');
  let filled = 0;
  try {
    while (filled < frame.length) {
      const { bytesRead } = await source.read(frame, filled, frame.length - filled, input.start + filled);
      if (bytesRead === 0) break; // a file shorter than announced: the check pass reports it
      filled += bytesRead;
    }
  } finally {
    await source.close();
  }
  const compressed = compressFrame(frame.subarray(0, filled), input.zstdLevel);
  frameBuffer = reusable;
  const partial = `${input.output}.partial-${process.pid}-${Math.random().toString(36).slice(2)}`;
  try {
    await writeFile(partial, compressed, { flag: 'wx' });
    await rename(partial, input.output);
  } catch (e) {
    await rm(partial, { force: true });
    throw e;
  }
  return { size: compressed.length };
}

export interface JoinFramesInput {
  frames: string[];
  output: string;
}

/** The stored file: the frames in order, with the nix32 SHA-256 (FileHash) and size of the whole. */
export async function joinNarFrames(input: JoinFramesInput): Promise<{ fileHash: string; fileSize: number }> {
  await mkdir(dirname(input.output), { recursive: true });
  const out = await open(input.output, 'wx');
  const hash = createHash('sha256');
  let fileSize = 0;
  try {
    for (const frame of input.frames) {
      for await (const chunk of createReadStream(frame, READ)) {
        hash.update(chunk as Buffer);
        fileSize += (chunk as Buffer).length;
        await out.write(chunk as Buffer);
      }
    }
    await out.close();
  } catch (e) {
    await out.close().catch(() => undefined);
    await rm(input.output, { force: true });
    throw e;
  }
  return { fileHash: sha256Nix32(hash.digest()).slice('sha256:'.length), fileSize };
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
    if (!isNarError(e)) throw e;
    if (e.offset === input.narSize && /larger than the limit/.test(e.reason)) {
      return { ok: false, field: 'NarSize', reason: `the NAR is longer than the announced ${input.narSize} bytes` };
    }
    return { ok: false, field: 'nar', reason: e.message };
  } finally {
    file.destroy();
  }
}
