// The CPU work of an ingest, in one of two ways, with one result: the checked digest, listing and
// references of the NAR, and the stored zstd file (fixed frames, so both ways write the same bytes).
// - an uncompressed staged NAR (REST uploads): the check pass and the frames run in parallel in the
//   CPU pool, and a chunked upload's frames were mostly compressed and joined while its chunks arrived;
// - a compressed one (`nix copy`): one pass that decompresses, checks and compresses;
// - a small uncompressed NAR in memory (an AddMultipleToStore stream): one pass over its bytes
//   (narBytesPass.ts), the stored file written from them.
import { mkdir, rm, stat, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { CpuPool } from '../cpuPool.js';
import type { StagingArea } from './narLocations.js';
import type { NarFrameSets } from './narFrameSets.js';
import type { VerifyOutput } from './frameTasks.js';
import type { CheckedNar } from './stagedCheck.js';
import { checkNarBytes, INLINE_NAR_BYTES, type NarBytesOutput } from './narBytesPass.js';

export interface PassRequest {
  /** the staged file, or the uncompressed NAR itself */
  source: string | Uint8Array;
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
  const { source } = request;
  if (typeof source !== 'string') {
    if (!isNone) throw new Error('runIngestPass: a NAR in memory is uncompressed');
    return bytesPass(cpu, { ...request, source }, zstdFile);
  }
  if (!isNone) {
    const result = await cpu.run('ingestStagedNar', { ...request, source, output: zstdFile });
    return result.ok ? { ...result, zstdFile } : result;
  }
  // Shorter than its NarSize, the NAR would end inside a frame: the narinfo's fault, not the disk's.
  const staged = (await stat(source)).size;
  if (staged < request.narSize) return { ok: false, field: 'NarSize', reason: `the NAR has ${staged} bytes, the narinfo says ${request.narSize}` };
  const dir = request.framesDir ?? staging.tempFile('.frames');
  try {
    const [checked, file] = await Promise.allSettled([checkPass(cpu, { ...request, source }), frames.stored(dir, source, request.narSize, zstdFile)]);
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
async function checkPass(cpu: CpuPool, request: PassRequest & { source: string }): Promise<VerifyOutput> {
  const { checked } = request;
  if (checked === undefined) return cpu.run('verifyStagedNar', { source: request.source, narSize: request.narSize, references: request.references });
  const { missingReferences } = request.references.length === 0
    ? { missingReferences: [] }
    : await cpu.run('scanStagedReferences', { source: request.source, narSize: request.narSize, references: request.references });
  return { ok: true as const, ...checked, missingReferences };
}

/** The pass over a NAR in memory (on this thread when it is small), its zstd bytes written to `zstdFile`. */
async function bytesPass(cpu: CpuPool, request: PassRequest & { source: Uint8Array }, zstdFile: string): Promise<PassResult> {
  const input = { nar: request.source, narSize: request.narSize, references: request.references, zstdLevel: request.zstdLevel };
  const result: NarBytesOutput = request.source.byteLength <= INLINE_NAR_BYTES ? await checkNarBytes(input) : await cpu.run('checkNarBytes', input);
  if (!result.ok) return result;
  const { zstd, ...checked } = result;
  await writeFile(zstdFile, zstd, { flag: 'wx', mode: 0o600 }).catch(async (e: unknown) => {
    // the staging tmp/ folder is made by the first file written there
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    await mkdir(dirname(zstdFile), { recursive: true });
    await writeFile(zstdFile, zstd, { flag: 'wx', mode: 0o600 });
  });
  return { ...checked, zstdFile };
}
