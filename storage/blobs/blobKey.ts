// Keys name blobs on every backend, so one rule keeps them safe as file paths and as S3 keys alike.
// Segments never start with a dot: the filesystem store keeps its temporary files under dot names
// in the same directories, so no key can collide with one and list() can skip them by name alone.

/** At most this many characters; S3 allows 1,024 bytes, the prefix needs room too. */
export const MAX_BLOB_KEY_LENGTH = 512;

const SEGMENT = /^[A-Za-z0-9_-][A-Za-z0-9._-]*$/;
const PREFIX_CHARS = /^[A-Za-z0-9._/-]*$/;

/** A key or list prefix that breaks the rule; the message names the key and the rule. */
export class BlobKeyError extends Error {
  constructor(key: string, rule: string) {
    super(`invalid blob key ${JSON.stringify(key.length > 80 ? `${key.slice(0, 80)}…` : key)}: ${rule}`);
    this.name = 'BlobKeyError';
  }
}

/** Why a key is invalid, or undefined when it is valid (`nar/<filehash>.nar.zst`). */
export function blobKeyProblem(key: string): string | undefined {
  if (key === '') return 'must not be empty';
  if (key.length > MAX_BLOB_KEY_LENGTH) return `must be at most ${MAX_BLOB_KEY_LENGTH} characters`;
  if (key.startsWith('/')) return 'must be relative (no leading "/")';
  for (const segment of key.split('/')) {
    if (segment === '') return 'must not contain empty segments ("//" or a trailing "/")';
    if (segment === '.' || segment === '..') return 'must not contain "." or ".." segments';
    if (!SEGMENT.test(segment)) {
      return 'segments use only A-Z a-z 0-9 . _ - and must not start with "."';
    }
  }
  return undefined;
}

/** Throws BlobKeyError unless `key` is a valid blob key. */
export function assertBlobKey(key: string): void {
  const problem = blobKeyProblem(key);
  if (problem !== undefined) throw new BlobKeyError(key, problem);
}

/** A list() prefix is any leading part of a key: '' (all), 'nar/', 'nar/0a'. */
export function assertBlobPrefix(prefix: string): void {
  if (prefix.length > MAX_BLOB_KEY_LENGTH) throw new BlobKeyError(prefix, `a prefix must be at most ${MAX_BLOB_KEY_LENGTH} characters`);
  if (prefix.startsWith('/')) throw new BlobKeyError(prefix, 'a prefix must be relative (no leading "/")');
  if (!PREFIX_CHARS.test(prefix)) throw new BlobKeyError(prefix, 'a prefix uses only A-Z a-z 0-9 . _ - /');
  const whole = prefix.split('/').slice(0, -1);
  if (whole.some((segment) => segment === '' || segment.startsWith('.'))) {
    throw new BlobKeyError(prefix, 'a prefix must not contain empty segments or segments starting with "."');
  }
}
