// The CPU work of an ingest for a small uncompressed NAR held in memory (a path of an
// AddMultipleToStore stream, `nix copy --to ssh-ng://`): parse, NarHash, listing, references and
// the stored zstd bytes in one pass over the bytes, with no staged file to write and read back.
// Same frames as the other passes (narFrames.ts), so the stored file is the same bytes. Runs on
// the calling thread for a NAR up to INLINE_NAR_BYTES, as a CPU pool task above it.
import { createHash } from 'node:crypto';
import { hashNar, NarListingBuilder, renderNarListing, sha256Nix32 } from '../../protocol/index.js';
import { narFault } from './frameTasks.js';
import { compressFrame, frameCount, frameRange } from './narFrames.js';
import { ReferenceScanner } from './referenceScanner.js';

/**
 * Up to this many bytes the pass runs on the event loop: a pool round trip (a structured clone each
 * way and a thread woken on a loaded machine) costs more than hashing and zstd level 1 of 256 KiB,
 * well under a millisecond.
 */
export const INLINE_NAR_BYTES = 256 * 1024;

export interface NarBytesInput {
  nar: Uint8Array;
  /** the narinfo's NarSize */
  narSize: number;
  /** hash parts of the declared references */
  references: string[];
  zstdLevel: number;
}

export type NarBytesOutput =
  | { ok: true; narHash: string; narSize: number; listing: string; missingReferences: string[]; fileHash: string; fileSize: number; zstd: Uint8Array }
  | { ok: false; field: 'nar' | 'NarSize'; reason: string };

export async function checkNarBytes(input: NarBytesInput): Promise<NarBytesOutput> {
  const { nar, narSize } = input;
  if (nar.byteLength < narSize) return { ok: false, field: 'NarSize', reason: `the NAR has ${nar.byteLength} bytes, the narinfo says ${narSize}` };
  const scanner = new ReferenceScanner(input.references);
  const listing = new NarListingBuilder();
  let digest: { narHash: string; narSize: number };
  try {
    scanner.push(nar);
    digest = await hashNar([nar], { maxNarSize: narSize }, listing);
  } catch (e) {
    return narFault(e, narSize);
  }
  const frames: Buffer[] = [];
  for (let i = 0; i < frameCount(narSize); i++) {
    const { start, end } = frameRange(i, narSize);
    frames.push(compressFrame(nar.subarray(start, end), input.zstdLevel));
  }
  const zstd = frames.length === 1 ? frames[0]! : Buffer.concat(frames);
  return {
    ok: true,
    ...digest,
    listing: renderNarListing(listing.listing),
    missingReferences: scanner.missing,
    fileHash: sha256Nix32(createHash('sha256').update(zstd).digest()).slice('sha256:'.length),
    fileSize: zstd.byteLength,
    zstd,
  };
}
