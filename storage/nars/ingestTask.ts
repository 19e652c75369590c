// The single-pass ingest as a CPU pool task (storage/cpuWorker.ts runs it in a worker thread), for
// a staged file that is compressed (what `nix copy` uploads): decompresses it and in one pass
// computes NarHash/NarSize, the .ls listing, the zstd file kiln stores (in fixed frames) with its
// FileHash/FileSize, and which declared references occur in the NAR. Uncompressed uploads take the
// parallel path instead (frameTasks.ts). Everything crossing the thread boundary is plain data.
import { createHash } from 'node:crypto';
import { mkdir, open, rm, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import { decompressNar, ingestNar, isNarError, isNarCompression, renderNarListing, sha256Nix32, NAR_COMPRESSIONS } from '../../protocol/index.js';
import { FramedCompressor } from './narFrames.js';
import { ReferenceScanner } from './referenceScanner.js';

export interface IngestTaskInput {
  /** The staged file. */
  source: string;
  /** The narinfo's Compression: none, zstd, xz, bzip2, br or gzip. */
  compression: string;
  /** Where the zstd file goes (created; must not exist); null hashes and checks only. */
  output: string | null;
  /** The narinfo's NarSize: a longer NAR stops at the first byte too many. */
  narSize: number;
  /** Hash parts of the declared references (the path's own included when it refers to itself). */
  references: string[];
  zstdLevel: number;
}

export type IngestTaskOutput =
  | {
      ok: true;
      narHash: string;
      narSize: number;
      /** nix32, without the `sha256:` prefix */
      fileHash: string;
      fileSize: number;
      listing: string;
      missingReferences: string[];
    }
  /** The upload's fault: `field` is nar, NarSize or Compression. Faults of the disk are thrown. */
  | { ok: false; field: 'nar' | 'NarSize' | 'Compression'; reason: string };

const READ = { highWaterMark: 1 << 20 };

export async function ingestStagedNar(input: IngestTaskInput): Promise<IngestTaskOutput> {
  const compression = input.compression === '' ? 'none' : input.compression;
  if (!isNarCompression(compression)) {
    return { ok: false, field: 'Compression', reason: `unsupported compression ${JSON.stringify(input.compression)}; supported: ${NAR_COMPRESSIONS.join(', ')}` };
  }
  const scanner = new ReferenceScanner(input.references);
  let readError: unknown;
  // Opened before any other await: a stream that opens itself would emit its ENOENT while no
  // reader listens yet, an uncaught error that takes the pool thread down.
  const file = (await open(input.source, 'r')).createReadStream(READ);
  const raw = (async function* () {
    try {
      for await (const chunk of file) yield chunk as Buffer;
    } catch (e) {
      readError = e;
      throw e;
    }
  })();
  // One byte past the announced size is enough to tell "longer than announced" from a bomb.
  const nar = decompressNar(raw, compression, { maxOutputBytes: input.narSize + 1 });
  const scanned = (async function* () {
    for await (const chunk of nar) {
      scanner.push(chunk);
      yield chunk;
    }
  })();

  let out: FileHandle | null = null;
  if (input.output !== null) {
    await mkdir(dirname(input.output), { recursive: true });
    out = await open(input.output, 'wx');
  }
  const target = out;
  let fileSize = 0;
  const fileHash = createHash('sha256');
  const zstd = new FramedCompressor(input.zstdLevel, async (chunk) => {
    fileHash.update(chunk);
    fileSize += chunk.length;
    if (target !== null) await target.write(chunk);
  });
  try {
    // ingestNar parses, hashes and lists; with compression 'none' it hands the checked NAR bytes
    // on, and kiln compresses them itself, in fixed frames (narFrames.ts says why).
    const result = await ingestNar(scanned, (chunk) => zstd.write(chunk), { compression: 'none', limits: { maxNarSize: input.narSize } });
    await zstd.end();
    const file = { fileHash: sha256Nix32(fileHash.digest()).slice('sha256:'.length), fileSize };
    await out?.close();
    out = null;
    return {
      ok: true,
      narHash: result.narHash,
      narSize: result.narSize,
      fileHash: file.fileHash,
      fileSize: file.fileSize,
      listing: renderNarListing(result.listing),
      missingReferences: scanner.missing,
    };
  } catch (e) {
    await out?.close();
    if (input.output !== null) await rm(input.output, { force: true });
    if (readError !== undefined && e === readError) throw e;
    return uploadFault(e, input.narSize, compression);
  } finally {
    file.destroy();
  }
}

function uploadFault(e: unknown, narSize: number, compression: string): IngestTaskOutput {
  if (isNarError(e)) {
    if (e.offset === narSize && /larger than the limit/.test(e.reason)) {
      return { ok: false, field: 'NarSize', reason: `the NAR is longer than the announced ${narSize} bytes` };
    }
    return { ok: false, field: 'nar', reason: e.message };
  }
  const message = e instanceof Error ? e.message : String(e);
  if (/expands beyond/.test(message)) return { ok: false, field: 'NarSize', reason: `the NAR is longer than the announced ${narSize} bytes` };
  if (/data is corrupt/.test(message)) return { ok: false, field: 'Compression', reason: `the file is not valid ${compression}: ${message}` };
  throw e;
}
