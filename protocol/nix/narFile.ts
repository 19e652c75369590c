// NAR file names. Nix names an uploaded NAR `<hash>.nar` plus its compression's extension; kiln
// stores each NAR once, zstd-compressed, as `<nix32 SHA-256 of the stored file>.nar.zst`, and that
// file's narinfo URL and blob key are both `nar/<its name>`.
import { NAR_COMPRESSIONS, type NarCompression } from './narDecompress.js';
import { isNix32 } from './nix32.js';

/** nix32 characters of a SHA-256: the file hash that names a stored NAR. */
const FILE_HASH_LENGTH = 52;
const STORED_EXTENSION = '.nar.zst';
const URL_FOLDER = 'nar/';

/** The file extension Nix gives a NAR with this compression (`nar/<hash>.nar.zst`). */
export const narFileExtension = (compression: NarCompression): string =>
  ({ none: '.nar', zstd: '.nar.zst', xz: '.nar.xz', bzip2: '.nar.bz2', br: '.nar.br', gzip: '.nar.gz' })[compression];

/** `<file hash>.nar.zst`, the name of a stored NAR. */
export const narFileName = (fileHash: string): string => `${fileHash}${STORED_EXTENSION}`;

/** `nar/<file hash>.nar.zst`: the narinfo URL of a stored NAR, relative to its cache, and its blob key. */
export const narUrl = (fileHash: string): string => `${URL_FOLDER}${narFileName(fileHash)}`;

/** The file hash a stored NAR's name carries, or undefined when `name` is not `<52 nix32 characters>.nar.zst`. */
export function parseNarFileName(name: string): string | undefined {
  if (name.length !== FILE_HASH_LENGTH + STORED_EXTENSION.length || !name.endsWith(STORED_EXTENSION)) return undefined;
  const fileHash = name.slice(0, FILE_HASH_LENGTH);
  return isNix32(fileHash) ? fileHash : undefined;
}

/** The file hash of `nar/<file hash>.nar.zst`, or undefined for any other URL or key. */
export const parseNarUrl = (url: string): string | undefined =>
  url.startsWith(URL_FOLDER) ? parseNarFileName(url.slice(URL_FOLDER.length)) : undefined;

/** What Nix may name a NAR it uploads: 1 to 64 characters of [0-9a-z], `.nar`, then an optional compression extension. */
const NIX_NAR_FILE = /^([0-9a-z]{1,64})(\.nar(?:\.[a-z0-9]+)?)$/;

/** The hash and compression of a NAR file name as `nix copy` uploads it, or undefined when it is not one. */
export function parseNixNarFileName(name: string): { hash: string; compression: NarCompression } | undefined {
  const match = NIX_NAR_FILE.exec(name);
  if (match === null) return undefined;
  const compression = NAR_COMPRESSIONS.find((c) => narFileExtension(c) === match[2]);
  return compression === undefined ? undefined : { hash: match[1]!, compression };
}
