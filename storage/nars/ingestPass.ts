// The CPU work of an ingest, in one of two ways, with one result: the checked digest, listing and
// references of the NAR, and the stored zstd file (fixed frames, so both ways write the same bytes).
// - an uncompressed staged NAR (REST uploads): the check pass and the frames run in parallel in the
//   CPU pool, and a chunked upload's frames were mostly compressed and joined while its chunks arrived;
// - a compressed one (`nix copy`): one pass that decompresses, checks and compresses.
import { rm, stat } from 'node:fs/promises';
import type { CpuPool } from '../cpuPool.js';
import type { StagingArea } from './narLocations.js';
import type { NarFrameSets } from './narFrameSets.js';
import type { VerifyOutput } from './frameTasks.js';
import type { CheckedNar } from './stagedCheck.js';

export interface PassRequest {
  source: string;
  compression: string;
  narSize: number;
  /** hash parts of the declared references */
  references: string[];
  zstdLevel: number;
  /** where the frames of this staged upload live; a temporary directory when absent */
  framesDir?: string;
  /** the check pass, already run as the chunks arrived (stagedChecks.ts); the references are scanned here */
  checked?: CheckedNar;
}

export type PassResult =
  | { ok: true; narHash: string; narSize: number; listing: string; missingReferences: string[]; zstdFile: string; fileHash: string; fileSize: number }
  | { ok: false; field: 'nar' | 'NarSize' | 'Compression'; reason: string };

export async function runIngestPass(cpu: CpuPool, frames: NarFrameSets, staging: StagingArea, request: PassRequest): Promise<PassResult> {
  const zstdFile = staging.tempFile('.nar.zst');
  const isNone = request.compression === 'none' || request.compression === '';
  if (!isNone) {
    const result = await cpu.run('ingestStagedNar', { ...request, output: zstdFile });
    return result.ok ? { ...result, zstdFile } : result;
  }
  // Shorter than its NarSize, the NAR would end inside a frame: the narinfo's fault, not the disk's.
  const staged = (await stat(request.source)).size;
  if (staged < request.narSize) return { ok: false, field: 'NarSize', reason: `the NAR has ${staged} bytes, the narinfo says ${request.narSize}` };
  const dir = request.framesDir ?? staging.tempFile('.frames');
  try {
    const [checked, file] = await Promise.allSettled([checkPass(cpu, request), frames.stored(dir, request.source, request.narSize, zstdFile)]);
    if (checked.status === 'fulfilled' && checked.value.ok && file.status === 'fulfilled') return { ...checked.value, ...file.value, zstdFile };
    await rm(zstdFile, { force: true });
    if (checked.status === 'rejected') throw checked.reason;
    if (!checked.value.ok) return checked.value;
    throw (file as PromiseRejectedResult).reason;
  } finally {
    // A staged upload's directory stays until it is ingested or abandoned.
    if (request.framesDir === undefined) await frames.discard(dir);
  }
}

/** The check pass: what ran while the chunks arrived plus a scan for the declared references, or the full pass over the staged file. */
async function checkPass(cpu: CpuPool, request: PassRequest): Promise<VerifyOutput> {
  const { checked } = request;
  if (checked === undefined) return cpu.run('verifyStagedNar', { source: request.source, narSize: request.narSize, references: request.references });
  const { missingReferences } = request.references.length === 0
    ? { missingReferences: [] }
    : await cpu.run('scanStagedReferences', { source: request.source, narSize: request.narSize, references: request.references });
  return { ok: true as const, ...checked, missingReferences };
}
