// Serialising a file, symlink or directory on disk into a NAR, byte for byte what
// `nix-store --dump` writes. This is the one module of protocol/nix that touches the
// filesystem (through node:fs/promises, read-only); everything else here is pure.
//
// Names travel as raw bytes (Buffer paths), so a file name that is not UTF-8 is dumped as it is
// and sorted where Nix sorts it: by unsigned byte order, like the std::map Nix walks.
import { lstat, open, readdir, readlink } from 'node:fs/promises';
import { encodeNarString, encodeNarStrings, encodeU64, NAR_MAGIC, padding } from './narEncoding.js';

export interface NarDumpOptions {
  /** Size of each read from a file, and of the batches small tokens are gathered into. */
  chunkBytes?: number;
}

const HEADER = encodeNarStrings(NAR_MAGIC);
const REGULAR = encodeNarStrings('(', 'type', 'regular');
const EXECUTABLE = encodeNarStrings('executable', '');
const CONTENTS = encodeNarStrings('contents');
const SYMLINK = encodeNarStrings('(', 'type', 'symlink', 'target');
const DIRECTORY = encodeNarStrings('(', 'type', 'directory');
const ENTRY_NAME = encodeNarStrings('entry', '(', 'name');
const NODE = encodeNarStrings('node');
const CLOSE = encodeNarStrings(')');

/** Gathers small tokens so a tree of tiny files does not become millions of tiny chunks. */
class Batcher {
  private parts: Uint8Array[] = [];
  private bytes = 0;
  constructor(readonly limit: number) {}
  add(part: Uint8Array): boolean {
    this.parts.push(part);
    this.bytes += part.length;
    return this.bytes >= this.limit;
  }
  take(): Uint8Array | undefined {
    if (this.bytes === 0) return undefined;
    const out = this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts, this.bytes);
    this.parts = [];
    this.bytes = 0;
    return out;
  }
}

/** Streams the NAR of `path` (not followed if it is a symlink, as Nix does). */
export async function* dumpNar(path: string | Buffer, options: NarDumpOptions = {}): AsyncGenerator<Uint8Array> {
  const batch = new Batcher(options.chunkBytes ?? 256 * 1024);
  batch.add(HEADER);
  yield* dumpNode(typeof path === 'string' ? Buffer.from(path) : path, batch);
  const rest = batch.take();
  if (rest) yield rest;
}

async function* dumpNode(path: Buffer, batch: Batcher): AsyncGenerator<Uint8Array> {
  const st = await lstat(path);
  if (st.isSymbolicLink()) {
    batch.add(SYMLINK);
    batch.add(encodeNarString(await readlink(path, { encoding: 'buffer' })));
    if (batch.add(CLOSE)) yield batch.take()!;
  } else if (st.isFile()) {
    batch.add(REGULAR);
    // Nix marks a file executable when its owner may execute it (S_IXUSR).
    if (st.mode & 0o100) batch.add(EXECUTABLE);
    batch.add(CONTENTS);
    yield* dumpContents(path, st.size, batch);
    if (batch.add(CLOSE)) yield batch.take()!;
  } else if (st.isDirectory()) {
    batch.add(DIRECTORY);
    const names = (await readdir(path, { encoding: 'buffer' })).sort(Buffer.compare);
    for (const name of names) {
      batch.add(ENTRY_NAME);
      batch.add(encodeNarString(name));
      if (batch.add(NODE)) yield batch.take()!;
      yield* dumpNode(Buffer.concat([path, Buffer.from('/'), name]), batch);
      if (batch.add(CLOSE)) yield batch.take()!;
    }
    if (batch.add(CLOSE)) yield batch.take()!;
  } else {
    throw new Error(`cannot dump ${path.toString()}: a NAR holds only regular files, directories and symlinks`);
  }
}

/** Copies exactly `size` bytes, as Nix does; a file that shrinks meanwhile is an error. */
async function* dumpContents(path: Buffer, size: number, batch: Batcher): AsyncGenerator<Uint8Array> {
  batch.add(encodeU64(size));
  const handle = await open(path, 'r');
  try {
    let done = 0;
    while (done < size) {
      const want = Math.min(batch.limit, size - done);
      const buffer = Buffer.allocUnsafe(want);
      let got = 0;
      while (got < want) {
        const { bytesRead } = await handle.read(buffer, got, want - got, done + got);
        if (bytesRead === 0) throw new Error(`cannot dump ${path.toString()}: the file shrank from ${size} bytes while it was read`);
        got += bytesRead;
      }
      done += want;
      if (want < batch.limit / 2) {
        if (batch.add(buffer)) yield batch.take()!;
      } else {
        // Large reads go out as they are rather than being copied into a batch.
        const pending = batch.take();
        if (pending) yield pending;
        yield buffer;
      }
    }
  } finally {
    await handle.close();
  }
  const pad = padding(size);
  if (pad) batch.add(new Uint8Array(pad));
}
