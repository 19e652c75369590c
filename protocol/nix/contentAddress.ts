// Store paths whose name follows from their contents (libstore/store-api.cc makeStorePath):
// "text" paths (.drv files, builtins.toFile) hash the file's bytes, "source" paths (./dir,
// builtins.path) hash the NAR. A server that recomputes the path from the bytes knows the bytes
// are what the path promises, so it can sign them without trusting who uploaded them.
import { createHash } from 'node:crypto';
import { formatHash, parseHash, type Hash } from './hash.js';
import { encodeNix32 } from './nix32.js';
import { parsedOk, parseFailure, type Parsed } from './parsed.js';
import { DEFAULT_STORE_DIR } from './storePath.js';

const sha256 = (data: string | Uint8Array): Buffer => createHash('sha256').update(data).digest();

/** Nix's compressHash: XOR-fold a digest down to 20 bytes. */
function compress(digest: Uint8Array, size = 20): Uint8Array {
  const out = new Uint8Array(size);
  for (let i = 0; i < digest.length; i++) out[i % size]! ^= digest[i]!;
  return out;
}

function makeStorePath(type: string, innerHex: string, name: string, storeDir: string): string {
  const fingerprint = `${type}:sha256:${innerHex}:${storeDir}:${name}`;
  return `${storeDir}/${encodeNix32(compress(sha256(fingerprint)))}-${name}`;
}

/** `type:ref1:ref2…[:self]`, references sorted as Nix's ordered set prints them. */
function makeType(type: string, references: readonly string[], self: boolean): string {
  return [type, ...[...references].sort(), ...(self ? ['self'] : [])].join(':');
}

/** The path of a text file (`builtins.toFile`, a .drv) with these contents and references. */
export function textStorePath(name: string, contents: Uint8Array, references: readonly string[], storeDir = DEFAULT_STORE_DIR): string {
  return makeStorePath(makeType('text', references, false), sha256(contents).toString('hex'), name, storeDir);
}

/** The path of a source added recursively with SHA-256 (`./dir`, `builtins.path`), from its NAR; `self`: it refers to itself. */
export function sourceStorePath(name: string, nar: Uint8Array, references: readonly string[], self: boolean, storeDir = DEFAULT_STORE_DIR): string {
  return makeStorePath(makeType('source', references, self), sha256(nar).toString('hex'), name, storeDir);
}

/**
 * A content address as a narinfo's CA line (and the daemon protocols' `ca` field) carries it,
 * normalized to print its hash in nix32 like every other hash in a narinfo. Anything else, a line
 * break above all, is refused: the value is written into a narinfo the cache signs.
 */
export function parseContentAddress(value: string): Parsed<string> {
  const match = /^(text:|fixed:r:|fixed:)(.+)$/.exec(value);
  if (!match) return parseFailure('CA', `expected "text:<hash>", "fixed:<hash>" or "fixed:r:<hash>", got ${JSON.stringify(value.slice(0, 120))}`);
  const hash = parseHash(match[2]!, undefined, 'CA');
  return hash.ok ? parsedOk(`${match[1]}${formatHash(hash.value)}`) : hash;
}

/** What a content address promises: the path it makes, and the hash of the contents it names (of the NAR, or of the one file). */
export interface ContentAddressClaim {
  path: string;
  of: 'nar' | 'file';
  hash: Hash;
}

/**
 * The store path a content address (`ca` of `nix path-info --json`) makes for `name` and these
 * references (full paths; the path's own as `self`), as libstore's makeFixedOutputPath and
 * makeTextPath compute it; undefined for a value Nix would not have written. A path equal to
 * `claim.path` whose contents hash to `claim.hash` is what its name says, whoever supplied it.
 */
export function contentAddressClaim(ca: string, name: string, references: readonly string[], self: boolean, storeDir = DEFAULT_STORE_DIR): ContentAddressClaim | undefined {
  const match = /^(text|fixed:r|fixed):(.+)$/.exec(ca);
  if (!match) return undefined;
  const hash = parseHash(match[2]!);
  if (!hash.ok) return undefined;
  const hex = Buffer.from(hash.value.digest).toString('hex');
  const kind = match[1]!;
  if (kind === 'text') {
    if (hash.value.algorithm !== 'sha256' || self) return undefined;
    return { path: makeStorePath(makeType('text', references, false), hex, name, storeDir), of: 'file', hash: hash.value };
  }
  const recursive = kind === 'fixed:r';
  if (recursive && hash.value.algorithm === 'sha256') {
    return { path: makeStorePath(makeType('source', references, self), hex, name, storeDir), of: 'nar', hash: hash.value };
  }
  if (references.length > 0 || self || hash.value.algorithm === 'blake3') return undefined;
  const inner = sha256(`fixed:out:${recursive ? 'r:' : ''}${hash.value.algorithm}:${hex}:`).toString('hex');
  return { path: makeStorePath('output:out', inner, name, storeDir), of: recursive ? 'nar' : 'file', hash: hash.value };
}
