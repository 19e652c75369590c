// Decompressing NAR files in any compression Nix may have uploaded them with. zstd, gzip and
// brotli come from node:zlib; xz and bzip2 from small pure-JS/WASM packages (docs/nix-formats.md).
import { byteIterator, type ByteSource } from './byteSource.js';
import { Readable, pipeline, type Transform } from 'node:stream';
import { createBrotliDecompress, createGunzip, createZstdDecompress } from 'node:zlib';
import { decompressBzip2, OutputBudgetExceeded } from './bzip2Decompress.js';
import { decompressXz } from './xzDecompress.js';
import { ZstdFrameTracker } from './zstdFrames.js';

export const NAR_COMPRESSIONS = ['none', 'zstd', 'xz', 'bzip2', 'br', 'gzip'] as const;
export type NarCompression = (typeof NAR_COMPRESSIONS)[number];

export const isNarCompression = (name: string): name is NarCompression => (NAR_COMPRESSIONS as readonly string[]).includes(name);

async function* throughZlib(source: ByteSource, transform: Transform, name: string): AsyncGenerator<Uint8Array> {
  // Errors of the source pass through unchanged; anything else the decompressor said is corrupt data.
  let sourceError: unknown;
  const tracked = (async function* () {
    try {
      yield* source;
    } catch (e) {
      sourceError = e;
      throw e;
    }
  })();
  // pipeline() forwards a source error into the transform and tears both down if we stop early.
  const output = pipeline(Readable.from(tracked), transform, () => undefined);
  try {
    for await (const chunk of output) yield chunk as Uint8Array;
  } catch (e) {
    if (e === sourceError) throw e;
    throw new Error(`${name} data is corrupt: ${(e as Error).message}`, { cause: e });
  }
}

/**
 * zstd, one frame at a time: node:zlib's decoder stops after the first frame and ends quietly
 * on a truncated one, so the frame tracker splits the input and checks that it ends whole.
 */
async function* decompressZstd(source: ByteSource): AsyncGenerator<Uint8Array> {
  const frames = new ZstdFrameTracker();
  const chunks = byteIterator(source);
  let pending: Uint8Array | undefined;
  let sourceDone = false;
  const oneFrame = async function* (): AsyncGenerator<Uint8Array> {
    for (;;) {
      if (!pending) {
        const next = await chunks.next();
        if (next.done) {
          sourceDone = true;
          return;
        }
        pending = next.value;
      }
      const step = frames.scan(pending, 0);
      if (typeof step === 'string') throw new Error(`zstd data is corrupt: ${step}`);
      const piece = pending.subarray(0, step.end);
      pending = step.end < pending.length ? pending.subarray(step.end) : undefined;
      yield piece;
      if (step.frameEnded) return;
    }
  };
  while (!sourceDone || pending) yield* throughZlib(oneFrame(), createZstdDecompress(), 'zstd');
  if (!frames.complete) throw new Error(`zstd data is corrupt: truncated, the input ends inside a frame at byte ${frames.position}`);
}

async function* limitOutput(source: ByteSource, maxBytes: number, compression: string): AsyncGenerator<Uint8Array> {
  let total = 0;
  for await (const chunk of source) {
    total += chunk.length;
    if (total > maxBytes) throw new Error(`${compression} data expands beyond ${maxBytes} bytes`);
    yield chunk;
  }
}

// bzip2 decodes a block (up to ~46 MB from ~40 input bytes) in one synchronous call, so the budget
// is checked inside the decoder rather than between the pieces it yields.
async function* bzip2WithinBudget(source: ByteSource, maxBytes: number | undefined): AsyncGenerator<Uint8Array> {
  try {
    yield* decompressBzip2(source, maxBytes);
  } catch (e) {
    if (e instanceof OutputBudgetExceeded) throw new Error(`bzip2 data expands beyond ${e.limit} bytes`);
    throw e;
  }
}

export interface DecompressOptions {
  /** Stops a decompression bomb: more output than this is an error. */
  maxOutputBytes?: number;
}

/** Decompresses a NAR file stream; `compression` is the narinfo's Compression value. */
export function decompressNar(source: ByteSource, compression: string, options: DecompressOptions = {}): AsyncIterable<Uint8Array> {
  const name = compression === '' ? 'none' : compression;
  if (!isNarCompression(name)) throw new Error(`unsupported compression ${JSON.stringify(compression)}; supported: ${NAR_COMPRESSIONS.join(', ')}`);
  const output =
    name === 'none'
      ? (async function* () {
          yield* source;
        })()
      : name === 'zstd'
        ? decompressZstd(source)
        : name === 'gzip'
          ? throughZlib(source, createGunzip(), name)
          : name === 'br'
            ? throughZlib(source, createBrotliDecompress(), name)
            : name === 'xz'
              ? decompressXz(source)
              : bzip2WithinBudget(source, options.maxOutputBytes);
  return options.maxOutputBytes === undefined ? output : limitOutput(output, options.maxOutputBytes, name);
}
