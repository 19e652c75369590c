// What a narinfo signature covers (libstore/path-info.cc, fingerprint()):
// `1;<store path>;sha256:<nix32 NarHash>;<NarSize>;<full reference paths, sorted, comma-joined>`.
// URL, compression and FileHash are not covered, which is why a cache may recompress freely.
import { toNix32Hash } from './hash.js';
import type { Narinfo } from './narinfo.js';
import { sortedUnique } from './narinfo.js';
import type { SigningKey, VerifyingKey } from './signingKey.js';
import { DEFAULT_STORE_DIR } from './storePath.js';

export type SignedFields = Pick<Narinfo, 'storePath' | 'narHash' | 'narSize' | 'references'>;

export function narinfoFingerprint(info: SignedFields, storeDir = DEFAULT_STORE_DIR): string {
  const narHash = toNix32Hash(info.narHash, 'sha256');
  if (!narHash) throw new Error(`cannot sign ${info.storePath}: NarHash ${JSON.stringify(info.narHash)} is not a sha256 hash`);
  // Nix refuses too: a fingerprint without the size would vouch for any NAR with that hash.
  if (!(info.narSize > 0)) throw new Error(`cannot sign ${info.storePath}: its NarSize is not known`);
  const references = sortedUnique(info.references).map((ref) => `${storeDir}/${ref}`);
  return `1;${info.storePath};${narHash};${info.narSize};${references.join(',')}`;
}

/** The `Sig:` value for `info`; add it to `sigs`. */
export const signNarinfo = (info: SignedFields, key: SigningKey, storeDir = DEFAULT_STORE_DIR): string =>
  key.sign(narinfoFingerprint(info, storeDir));

/** True when at least one of `info.sigs` is valid under one of `trusted` (Nix's rule with sigs-needed 1). */
export function verifyNarinfo(info: SignedFields & Pick<Narinfo, 'sigs'>, trusted: readonly VerifyingKey[], storeDir = DEFAULT_STORE_DIR): boolean {
  const fingerprint = narinfoFingerprint(info, storeDir);
  return info.sigs.some((sig) => trusted.some((key) => key.verify(fingerprint, sig)));
}
