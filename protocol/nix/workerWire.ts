// The byte format of Nix's daemon (worker) and serve protocols, as libutil/serialise.cc writes
// it: 64-bit little-endian integers, strings as length + bytes + zero padding to 8, string lists
// as count + strings, and framed streams (length-prefixed frames ending with a 0-length one).
// A reader pulls from a chunk stream and refuses what Nix would not send (bad padding, absurd
// lengths) with a WireError, so a hostile client cannot make the server buffer without bound.
import { byteIterator, type ByteSource } from './byteSource.js';

export const WORKER_MAGIC_1 = 0x6e697863;
export const WORKER_MAGIC_2 = 0x6478696f;
export const STDERR_LAST = 0x616c7473;
export const STDERR_ERROR = 0x63787470;

/** Longest ordinary string (a store path, a hash, a signature, a setting) a reader accepts. */
export const MAX_WIRE_STRING = 1 << 20;
/** Most entries of a list (paths of QueryValidPaths, references, settings). */
export const MAX_WIRE_LIST = 1 << 20;
/** Most bytes of a list's strings together: a million entries of a MiB each would be a TiB held in memory. */
export const MAX_WIRE_LIST_BYTES = 32 << 20;

export class WireError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WireError';
  }
}

/** Reads the protocol's values from a chunk stream, pulling only what each value needs. */
export class WireReader {
  private readonly chunks: AsyncIterator<Uint8Array> | Iterator<Uint8Array>;
  private buffer: Buffer = Buffer.alloc(0);
  private ended = false;

  constructor(source: ByteSource) {
    this.chunks = byteIterator(source);
  }

  /** Whether the stream ended with no byte left (the client closed between operations). */
  async atEnd(): Promise<boolean> {
    if (this.buffer.length > 0) return false;
    await this.fill(1);
    return this.buffer.length === 0;
  }

  private async fill(n: number): Promise<void> {
    while (this.buffer.length < n && !this.ended) {
      const next = await this.chunks.next();
      if (next.done) {
        this.ended = true;
        break;
      }
      this.buffer = this.buffer.length === 0 ? Buffer.from(next.value) : Buffer.concat([this.buffer, next.value]);
    }
  }

  /** Exactly `n` bytes; a WireError when the stream ends first. */
  async bytes(n: number): Promise<Buffer> {
    await this.fill(n);
    if (this.buffer.length < n) throw new WireError(`the stream ended ${n - this.buffer.length} bytes short`);
    const out = this.buffer.subarray(0, n);
    this.buffer = this.buffer.subarray(n);
    return out;
  }

  /** Up to `max` bytes that are already here or come in the next chunk (at least one). */
  async some(max: number): Promise<Buffer> {
    await this.fill(1);
    if (this.buffer.length === 0) throw new WireError('the stream ended in the middle of a frame');
    const out = this.buffer.subarray(0, Math.min(max, this.buffer.length));
    this.buffer = this.buffer.subarray(out.length);
    return out;
  }

  async u64(): Promise<number> {
    const b = await this.bytes(8);
    const value = b.readBigUInt64LE(0);
    if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw new WireError(`integer ${value} is out of range`);
    return Number(value);
  }

  async bool(): Promise<boolean> {
    return (await this.u64()) !== 0;
  }

  async padding(length: number): Promise<void> {
    const pad = (8 - (length % 8)) % 8;
    if (pad === 0) return;
    const b = await this.bytes(pad);
    if (b.some((x) => x !== 0)) throw new WireError('non-zero padding');
  }

  async blob(max = MAX_WIRE_STRING): Promise<Buffer> {
    return this.blobOf(await this.u64(), max);
  }

  /** The bytes and padding of a string whose length was read. */
  private async blobOf(length: number, max: number): Promise<Buffer> {
    if (length > max) throw new WireError(`a string of ${length} bytes is longer than ${max}`);
    const b = Buffer.from(await this.bytes(length));
    await this.padding(length);
    return b;
  }

  async string(max = MAX_WIRE_STRING): Promise<string> {
    return (await this.blob(max)).toString('utf8');
  }

  async strings(maxCount = MAX_WIRE_LIST, maxBytes = MAX_WIRE_LIST_BYTES): Promise<string[]> {
    const count = await this.u64();
    if (count > maxCount) throw new WireError(`a list of ${count} entries is longer than ${maxCount}`);
    const out: string[] = [];
    let total = 0;
    for (let i = 0; i < count; i++) {
      const length = await this.u64();
      total += length;
      // Checked before the string is read: what was read so far stays under the cap.
      if (total > maxBytes) throw new WireError(`a list's strings add up to more than ${maxBytes} bytes`);
      out.push((await this.blobOf(length, MAX_WIRE_STRING)).toString('utf8'));
    }
    return out;
  }

  /** Exactly `length` bytes as chunks of at most `piece` bytes (a NAR of known size); a WireError when the stream ends first. */
  async *exactly(length: number, piece = 1 << 20): AsyncGenerator<Buffer> {
    let left = length;
    while (left > 0) {
      const got = await this.some(Math.min(left, piece));
      left -= got.length;
      yield Buffer.from(got);
    }
  }

  /** The frames of a framed stream (FramedSink), up to its empty end frame; each at most `maxFrame` bytes. */
  async *frames(maxFrame: number): AsyncGenerator<Buffer> {
    for (;;) {
      let length = await this.u64();
      if (length === 0) return;
      if (length > maxFrame) throw new WireError(`a frame of ${length} bytes is longer than ${maxFrame}`);
      while (length > 0) {
        const piece = await this.some(length);
        length -= piece.length;
        yield Buffer.from(piece);
      }
    }
  }
}

const zeros = Buffer.alloc(8);

export function wireU64(n: number | bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt(n));
  return b;
}

export function wireString(s: string | Uint8Array): Buffer {
  const bytes = typeof s === 'string' ? Buffer.from(s, 'utf8') : Buffer.from(s);
  const pad = (8 - (bytes.length % 8)) % 8;
  return Buffer.concat([wireU64(bytes.length), bytes, zeros.subarray(0, pad)]);
}

export function wireStrings(list: readonly string[]): Buffer {
  return Buffer.concat([wireU64(list.length), ...list.map(wireString)]);
}

/**
 * STDERR_ERROR and the error as a daemon sends it to a client of protocol 1.26 or later
 * (serialise.cc, `operator<<(Sink&, const Error&)`): type "Error", level, name, message, no
 * position, no traces.
 */
export function wireDaemonError(message: string, clientMinor: number): Buffer {
  if (clientMinor >= 26) {
    return Buffer.concat([wireU64(STDERR_ERROR), wireString('Error'), wireU64(0), wireString('Error'), wireString(message), wireU64(0), wireU64(0)]);
  }
  return Buffer.concat([wireU64(STDERR_ERROR), wireString(message), wireU64(1)]);
}

/** A path's info as both store protocols send it before an imported NAR (ValidPathInfo without its path's validity flags). */
export interface ImportedPathInfo {
  path: string;
  deriver: string;
  narHash: string;
  references: string[];
  narSize: number;
  ca: string;
}

/**
 * Most references of one path a client may send: what PUT /cache/{cache}/nar and an export file
 * allow. The list is kept for the path's ingest (eight at once in an AddMultipleToStore stream)
 * and lands in the narinfo the cache signs and serves.
 */
const MAX_PATH_REFERENCES = 100_000;

/** Reads that info; registration time, ultimate and the client's signatures are read and dropped (never trusted from a client). */
export async function readImportedPathInfo(from: WireReader): Promise<ImportedPathInfo> {
  const path = await from.string();
  const deriver = await from.string();
  const narHash = await from.string();
  const references = await from.strings(MAX_PATH_REFERENCES);
  await from.u64(); // registration time
  const narSize = await from.u64();
  await from.u64(); // ultimate
  await from.strings(); // the client's signatures: the cache signs with its own key
  const ca = await from.string();
  return { path, deriver, narHash, references, narSize, ca };
}
