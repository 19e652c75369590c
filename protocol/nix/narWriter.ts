// Writing a NAR from a tree of files, symlinks and directories, byte for byte what `nix-store
// --dump` writes. The tree is abstract (NarTreeNode), so this stays pure: the worker walks the
// filesystem (worker/narDump.ts), tests can hand in a tree held in memory.
//
// Names travel as raw bytes, so a file name that is not UTF-8 is written as it is and sorted
// where Nix sorts it: by unsigned byte order, like the std::map Nix walks.
import { encodeNarString, encodeNarStrings, encodeU64, NAR_MAGIC, padding } from './narEncoding.js';

/** One node of the tree a NAR is written from; a directory's children are asked for one at a time, when the writer reaches them. */
export type NarTreeNode =
  | {
      type: 'regular';
      executable: boolean;
      size: number;
      /** Exactly `size` bytes, in chunks of at most `chunkBytes`. */
      contents(chunkBytes: number): AsyncIterable<Uint8Array>;
    }
  | { type: 'symlink'; target: Uint8Array }
  | { type: 'directory'; names(): Promise<Uint8Array[]>; child(name: Uint8Array): Promise<NarTreeNode> };

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

/** Streams the NAR of the tree under `root`. */
export async function* writeNar(root: NarTreeNode, options: NarDumpOptions = {}): AsyncGenerator<Uint8Array> {
  const batch = new Batcher(options.chunkBytes ?? 256 * 1024);
  batch.add(HEADER);
  yield* writeNode(root, batch);
  const rest = batch.take();
  if (rest) yield rest;
}

async function* writeNode(node: NarTreeNode, batch: Batcher): AsyncGenerator<Uint8Array> {
  if (node.type === 'symlink') {
    batch.add(SYMLINK);
    batch.add(encodeNarString(node.target));
    if (batch.add(CLOSE)) yield batch.take()!;
  } else if (node.type === 'regular') {
    batch.add(REGULAR);
    if (node.executable) batch.add(EXECUTABLE);
    batch.add(CONTENTS);
    yield* writeContents(node, batch);
    if (batch.add(CLOSE)) yield batch.take()!;
  } else {
    batch.add(DIRECTORY);
    const names = (await node.names()).sort(Buffer.compare);
    for (const name of names) {
      batch.add(ENTRY_NAME);
      batch.add(encodeNarString(name));
      if (batch.add(NODE)) yield batch.take()!;
      yield* writeNode(await node.child(name), batch);
      if (batch.add(CLOSE)) yield batch.take()!;
    }
    if (batch.add(CLOSE)) yield batch.take()!;
  }
}

/** The length, the bytes and the padding; contents that are not exactly `size` bytes long would make a NAR that lies. */
async function* writeContents(node: Extract<NarTreeNode, { type: 'regular' }>, batch: Batcher): AsyncGenerator<Uint8Array> {
  batch.add(encodeU64(node.size));
  let written = 0;
  for await (const chunk of node.contents(batch.limit)) {
    written += chunk.length;
    if (written > node.size) throw new Error(`a file of ${node.size} bytes gave more bytes than that`);
    if (chunk.length < batch.limit / 2) {
      if (batch.add(chunk)) yield batch.take()!;
    } else {
      // Large chunks go out as they are rather than being copied into a batch.
      const pending = batch.take();
      if (pending) yield pending;
      yield chunk;
    }
  }
  if (written < node.size) throw new Error(`a file of ${node.size} bytes gave only ${written} bytes`);
  const pad = padding(node.size);
  if (pad) batch.add(new Uint8Array(pad));
}
