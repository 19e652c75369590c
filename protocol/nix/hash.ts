// Hashes as Nix writes them. Nix accepts four spellings of the same digest:
// `<algo>:<nix32>`, `<algo>:<base16>`, `<algo>:<base64>` (told apart by length) and SRI
// `<algo>-<base64>`; it prints nix32 in narinfos and fingerprints. `blake3` is recognised because
// older kiln uploads were keyed by BLAKE3 (spec: "Older uploads hashed with another algorithm
// (blake3: prefix) still resolve"); kiln never computes it.
import { decodeNix32, encodeNix32, nix32Length } from './nix32.js';
import { parseFailure, parsedOk, type Parsed } from './parsed.js';

export const HASH_ALGORITHMS = ['md5', 'sha1', 'sha256', 'sha512', 'blake3'] as const;
export type HashAlgorithm = (typeof HASH_ALGORITHMS)[number];

const DIGEST_BYTES: Record<HashAlgorithm, number> = { md5: 16, sha1: 20, sha256: 32, sha512: 64, blake3: 32 };

export interface Hash {
  algorithm: HashAlgorithm;
  digest: Uint8Array;
}

export type HashFormat = 'nix32' | 'base16' | 'base64' | 'sri';

export const digestBytes = (algorithm: HashAlgorithm): number => DIGEST_BYTES[algorithm];
const base64Length = (bytes: number): number => 4 * Math.ceil(bytes / 3);
const isHashAlgorithm = (s: string): s is HashAlgorithm => (HASH_ALGORITHMS as readonly string[]).includes(s);

const BASE16 = /^[0-9a-fA-F]*$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

function decodeBase64Exact(text: string, bytes: number): Uint8Array | undefined {
  if (text.length !== base64Length(bytes) || !BASE64.test(text)) return undefined;
  const out = Buffer.from(text, 'base64');
  // Buffer's decoder ignores stray bits; re-encoding catches a digest with a non-canonical tail.
  if (out.length !== bytes || out.toString('base64') !== text) return undefined;
  return new Uint8Array(out.buffer, out.byteOffset, out.length);
}

/** Decodes the part after `<algo>:` by its length, as Nix does. */
function decodeDigest(algorithm: HashAlgorithm, text: string): Uint8Array | undefined {
  const bytes = DIGEST_BYTES[algorithm];
  if (text.length === bytes * 2) {
    if (!BASE16.test(text)) return undefined;
    return new Uint8Array(Buffer.from(text, 'hex'));
  }
  if (text.length === nix32Length(bytes)) return decodeNix32(text, bytes);
  return decodeBase64Exact(text, bytes);
}

/**
 * Parses a hash in any spelling Nix accepts. Without a prefix the text is only understood when
 * `algorithm` says which it is (Nix's `--type sha256` case). With `algorithm` set, a hash of
 * another algorithm is refused.
 */
export function parseHash(text: string, algorithm?: HashAlgorithm, field = 'hash'): Parsed<Hash> {
  const colon = text.indexOf(':');
  const dash = text.indexOf('-');
  let algo: string;
  let rest: string;
  let sri = false;
  if (colon > 0 && (dash < 0 || colon < dash)) {
    algo = text.slice(0, colon);
    rest = text.slice(colon + 1);
  } else if (dash > 0) {
    algo = text.slice(0, dash);
    rest = text.slice(dash + 1);
    sri = true;
  } else if (algorithm) {
    algo = algorithm;
    rest = text;
  } else {
    return parseFailure(field, `expected "<algorithm>:<digest>" or an SRI hash, got ${quote(text)}`);
  }
  if (!isHashAlgorithm(algo)) {
    return parseFailure(field, `unknown hash algorithm ${quote(algo)} (known: ${HASH_ALGORITHMS.join(', ')})`);
  }
  if (algorithm && algo !== algorithm) return parseFailure(field, `expected a ${algorithm} hash, got ${algo}`);
  const bytes = DIGEST_BYTES[algo];
  const digest = sri ? decodeBase64Exact(rest, bytes) : decodeDigest(algo, rest);
  if (!digest) {
    const forms = sri
      ? `${base64Length(bytes)} base64 characters`
      : `${nix32Length(bytes)} nix32, ${bytes * 2} base16 or ${base64Length(bytes)} base64 characters`;
    return parseFailure(field, `not a valid ${algo} digest: expected ${forms}, got ${quote(rest)}`);
  }
  return parsedOk({ algorithm: algo, digest });
}

/** Prints a hash; `nix32` with its `<algo>:` prefix is what narinfos and fingerprints use. */
export function formatHash(hash: Hash, format: HashFormat = 'nix32', withPrefix = true): string {
  const b64 = () => Buffer.from(hash.digest.buffer, hash.digest.byteOffset, hash.digest.length).toString('base64');
  if (format === 'sri') return `${hash.algorithm}-${b64()}`;
  const body =
    format === 'nix32'
      ? encodeNix32(hash.digest)
      : format === 'base16'
        ? Buffer.from(hash.digest.buffer, hash.digest.byteOffset, hash.digest.length).toString('hex')
        : b64();
  return withPrefix ? `${hash.algorithm}:${body}` : body;
}

/** Normalises any accepted spelling to `<algo>:<nix32>`, or undefined if it is not a hash. */
export function toNix32Hash(text: string, algorithm?: HashAlgorithm): string | undefined {
  const parsed = parseHash(text, algorithm);
  return parsed.ok ? formatHash(parsed.value) : undefined;
}

export const hashEquals = (a: Hash, b: Hash): boolean =>
  a.algorithm === b.algorithm && Buffer.compare(a.digest, b.digest) === 0;

const quote = (s: string): string => JSON.stringify(s.length > 80 ? `${s.slice(0, 80)}…` : s);
