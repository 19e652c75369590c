// bzip2 decompression with the block decoder of unbzip2-stream (pure JavaScript): Nix's narinfo
// default when a Compression line is missing, and what the oldest caches hold.
//
// The package's own stream is not used: it decodes every block it holds in one synchronous call
// (a whole small file at end()), one JavaScript number per output byte, so a 400-byte file of
// 50 MiB of zeros took 34 s and gigabytes of heap before a consumer could say "enough". Here a
// block is decoded into byte buffers and the output budget is checked byte by byte inside the
// decoder, so a bomb stops at the first byte over `maxOutputBytes` (DecompressOptions).
import { createRequire } from 'node:module';
import { byteIterator, type ByteSource } from './byteSource.js';

interface BitReader {
  (n: number | null): number;
  bytesRead: number;
}
interface Bzip2Decoder {
  header(bits: BitReader): number;
  /** The running stream CRC after a block, or null at the end-of-stream marker. */
  decompress(bits: BitReader, out: (byte: number) => void, buf: Int32Array, bufsize: number, streamCRC: number): number | null;
}
const requireCjs = createRequire(import.meta.url);
const bzip2 = requireCjs('unbzip2-stream/lib/bzip2.js') as Bzip2Decoder;
const bitIterator = requireCjs('unbzip2-stream/lib/bit_iterator.js') as (next: () => Uint8Array | undefined) => BitReader;

/** A compressed bzip2 block is at most this many bytes (unbzip2-stream's bound, per 100k of block size). */
const maxBlockInput = (blockSize: number): number => 25_000 + 100_000 * blockSize;
const PIECE_BYTES = 1 << 20;

/** Thrown inside the decoder when the output passes the budget (narDecompress.ts words the message). */
export class OutputBudgetExceeded extends Error {
  constructor(readonly limit: number) {
    super(`output exceeds ${limit} bytes`);
  }
}

export async function* decompressBzip2(source: ByteSource, maxOutputBytes = Number.POSITIVE_INFINITY): AsyncGenerator<Uint8Array> {
  const input: Uint8Array[] = [];
  let received = 0;
  let sourceDone = false;
  // Made once input has arrived: the reader takes its first buffer when it is made.
  let reader: BitReader | undefined;
  // The decoder keeps its tables on `this`: each stream gets its own, so streams may interleave.
  const decoder = Object.create(bzip2) as Bzip2Decoder;
  const chunks = byteIterator(source);

  let produced = 0;
  let piece = new Uint8Array(PIECE_BYTES);
  let filled = 0;
  let ready: Uint8Array[] = [];
  const emit = (byte: number): void => {
    if (++produced > maxOutputBytes) throw new OutputBudgetExceeded(maxOutputBytes);
    piece[filled++] = byte;
    if (filled === PIECE_BYTES) {
      ready.push(piece);
      piece = new Uint8Array(PIECE_BYTES);
      filled = 0;
    }
  };
  const flush = (): Uint8Array[] => {
    if (filled > 0) {
      ready.push(piece.slice(0, filled));
      filled = 0;
    }
    const out = ready;
    ready = [];
    return out;
  };

  let blockSize = 0;
  let streamCRC: number | null = null;
  let buf = new Int32Array(0);
  for (;;) {
    // The decoder reads synchronously: a whole block must be buffered before it starts.
    const need = blockSize === 0 ? 4 : maxBlockInput(blockSize);
    while (!sourceDone && received - (reader?.bytesRead ?? 0) < need) {
      const next = await chunks.next();
      if (next.done) sourceDone = true;
      else if (next.value.length > 0) {
        input.push(next.value);
        received += next.value.length;
      }
    }
    if (received <= (reader?.bytesRead ?? 0)) break;
    const bits = (reader ??= bitIterator(() => input.shift()));
    try {
      if (blockSize === 0) {
        blockSize = decoder.header(bits);
        streamCRC = 0;
        if (buf.length !== 100_000 * blockSize) buf = new Int32Array(100_000 * blockSize);
        continue;
      }
      streamCRC = decoder.decompress(bits, emit, buf, buf.length, streamCRC ?? 0);
      if (streamCRC === null) blockSize = 0; // end of stream: another may follow (pbzip2)
    } catch (e) {
      if (e instanceof OutputBudgetExceeded) throw e;
      // The bit reader runs off the end of the input as a TypeError: the file is cut short.
      const reason = e instanceof TypeError ? 'truncated, the input ends inside a block' : (e as Error).message;
      throw new Error(`bzip2 data is corrupt: ${reason}`, { cause: e });
    }
    yield* flush();
  }
  if (streamCRC !== null) throw new Error('bzip2 data is corrupt: truncated, the input ends before the end-of-stream marker');
  if (blockSize === 0 && received === 0) throw new Error('bzip2 data is corrupt: the input is empty');
}
