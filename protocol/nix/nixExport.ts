// The `nix-store --export` format (libstore/export-import.cc), read from memory: for each path
// a 1, the path's NAR, the magic "NIXE", the path, its references, its deriver ("" for none) and
// a 0 (no legacy signature); a final 0 ends the stream. Direct builds (docs/builds.md) take a
// derivation's closure in this form, which is at most 20 MiB, so a Buffer is fine here.
import { parseFailure, parsedOk, type Parsed } from './parsed.js';
import { parseStorePath } from './storePath.js';
import { EXPORT_MAGIC } from './exportWire.js';

export interface ExportedPath {
  path: string;
  /** the path's NAR, a view into the input */
  nar: Buffer;
  references: string[];
  deriver: string | null;
}

/** Far above any real closure of .drv files and sources; keeps a hostile count from looping. */
const MAX_PATHS = 100_000;
const MAX_REFERENCES = 100_000;
const MAX_DEPTH = 256;

class Truncated extends Error {}
class Malformed extends Error {}

class Cursor {
  offset = 0;
  constructor(readonly bytes: Buffer) {}

  u64(): number {
    if (this.offset + 8 > this.bytes.length) throw new Truncated('the stream ends inside a number');
    const low = this.bytes.readUInt32LE(this.offset);
    const high = this.bytes.readUInt32LE(this.offset + 4);
    this.offset += 8;
    if (high > 0x1fffff) throw new Malformed(`a number at byte ${this.offset - 8} is too large`);
    return high * 0x100000000 + low;
  }

  string(max: number): Buffer {
    const length = this.u64();
    if (length > max) throw new Malformed(`a string of ${length} bytes at byte ${this.offset - 8} exceeds ${max}`);
    const padded = length + ((8 - (length % 8)) % 8);
    if (this.offset + padded > this.bytes.length) throw new Truncated('the stream ends inside a string');
    const value = this.bytes.subarray(this.offset, this.offset + length);
    this.offset += padded;
    return value;
  }

  text(max = 4096): string {
    return this.string(max).toString('utf8');
  }

  expect(token: string): void {
    const got = this.text(64);
    if (got !== token) throw new Malformed(`expected "${token}" at byte ${this.offset}, got ${JSON.stringify(got.slice(0, 40))}`);
  }
}

/** Skips one NAR node ("(" … ")"); the NAR's contents are checked fully when it is hashed. */
function skipNode(c: Cursor, depth: number): void {
  if (depth > MAX_DEPTH) throw new Malformed('the NAR nests directories too deep');
  c.expect('(');
  c.expect('type');
  const type = c.text(16);
  if (type === 'regular') {
    let tag = c.text(16);
    if (tag === 'executable') {
      c.expect('');
      tag = c.text(16);
    }
    if (tag !== 'contents') throw new Malformed(`expected "contents", got ${JSON.stringify(tag)}`);
    c.string(Number.MAX_SAFE_INTEGER);
    c.expect(')');
  } else if (type === 'symlink') {
    c.expect('target');
    c.string(4096);
    c.expect(')');
  } else if (type === 'directory') {
    for (let tag = c.text(16); tag !== ')'; tag = c.text(16)) {
      if (tag !== 'entry') throw new Malformed(`expected "entry" or ")", got ${JSON.stringify(tag)}`);
      c.expect('(');
      c.expect('name');
      c.string(255);
      c.expect('node');
      skipNode(c, depth + 1);
      c.expect(')');
    }
  } else {
    throw new Malformed(`unknown NAR node type ${JSON.stringify(type)}`);
  }
}

/** The paths of an export stream in order; a malformed or truncated stream names what broke. */
export function parseNixExport(bytes: Buffer): Parsed<ExportedPath[]> {
  const c = new Cursor(bytes);
  const paths: ExportedPath[] = [];
  try {
    for (;;) {
      const marker = c.u64();
      if (marker === 0) break;
      if (marker !== 1) throw new Malformed(`expected 1 (another path) or 0 (end) at byte ${c.offset - 8}, got ${marker}`);
      if (paths.length >= MAX_PATHS) throw new Malformed(`more than ${MAX_PATHS} paths`);
      const start = c.offset;
      c.expect('nix-archive-1');
      skipNode(c, 0);
      const nar = bytes.subarray(start, c.offset);
      if (c.u64() !== EXPORT_MAGIC) throw new Malformed(`the export magic is missing after the NAR ending at byte ${c.offset - 8}`);
      const path = c.text(400);
      const parsed = parseStorePath(path);
      if (!parsed.ok) throw new Malformed(parsed.reason);
      const count = c.u64();
      if (count > MAX_REFERENCES) throw new Malformed(`${path} has ${count} references`);
      const references: string[] = [];
      for (let i = 0; i < count; i++) {
        const reference = c.text(400);
        const ok = parseStorePath(reference);
        if (!ok.ok) throw new Malformed(`a reference of ${path}: ${ok.reason}`);
        references.push(reference);
      }
      const deriver = c.text(400);
      if (c.u64() !== 0) throw new Malformed(`${path} carries a legacy signature, which kiln does not read`);
      paths.push({ path, nar, references, deriver: deriver === '' ? null : deriver });
    }
  } catch (e) {
    if (e instanceof Truncated) return parseFailure('closure', `the export stream is truncated: ${e.message} (after ${paths.length} complete paths)`);
    if (e instanceof Malformed) return parseFailure('closure', `not a nix-store --export stream: ${e.message}`);
    throw e;
  }
  if (c.offset !== bytes.length) return parseFailure('closure', `${bytes.length - c.offset} bytes follow the end of the export stream`);
  return parsedOk(paths);
}

/** The contents of a NAR that holds one regular, non-executable file; null for anything else. */
export function narFileContents(nar: Buffer): Buffer | null {
  const c = new Cursor(nar);
  try {
    c.expect('nix-archive-1');
    c.expect('(');
    c.expect('type');
    if (c.text(16) !== 'regular') return null;
    if (c.text(16) !== 'contents') return null;
    const contents = c.string(Number.MAX_SAFE_INTEGER);
    c.expect(')');
    return c.offset === nar.length ? contents : null;
  } catch (e) {
    if (e instanceof Truncated || e instanceof Malformed) return null;
    throw e;
  }
}
