// NarHash and NarSize of a NAR stream, parsing it on the way so that only a well-formed NAR
// gets a digest. This is the finalize check: Nix never verifies FileHash, so the server
// verifies NarHash/NarSize itself on every ingest (DESIGN.md, binary cache rules).
import type { ByteSource } from './byteSource.js';
import { createHash } from 'node:crypto';
import { formatHash } from './hash.js';
import { isNarError } from './narError.js';
import type { NarLimits } from './narLimits.js';
import { NarParser, type NarVisitor } from './narParser.js';
import { parseFailure, parsedOk, type Parsed } from './parsed.js';

export interface NarDigest {
  /** `sha256:<nix32>`, as a narinfo's NarHash. */
  narHash: string;
  narSize: number;
}

export const sha256Nix32 = (digest: Uint8Array): string => formatHash({ algorithm: 'sha256', digest });

/** Hashes and parses `source`; throws NarError if it is not a well-formed NAR. */
export async function hashNar(source: ByteSource, limits: Partial<NarLimits> = {}, visitor: NarVisitor = {}): Promise<NarDigest> {
  const hash = createHash('sha256');
  const parser = new NarParser(visitor, limits);
  for await (const chunk of source) {
    parser.push(chunk);
    hash.update(chunk);
  }
  parser.end();
  return { narHash: sha256Nix32(hash.digest()), narSize: parser.position };
}

/**
 * Checks a staged NAR against the narinfo that came with it. A malformed NAR or a mismatch is
 * the uploader's fault and comes back as `{ ok: false }` naming the field; errors of the source
 * itself (a failing disk) are thrown.
 */
export async function verifyNar(
  source: ByteSource,
  expected: NarDigest,
  limits: Partial<NarLimits> = {},
): Promise<Parsed<NarDigest>> {
  let digest: NarDigest;
  try {
    // A NAR longer than announced fails at the first byte too many instead of being read to the end.
    digest = await hashNar(source, { ...limits, maxNarSize: Math.min(limits.maxNarSize ?? Number.MAX_SAFE_INTEGER, expected.narSize) });
  } catch (e) {
    if (!isNarError(e)) throw e;
    if (e.offset === expected.narSize && /larger than the limit/.test(e.reason)) {
      return parseFailure('NarSize', `the NAR is longer than the announced ${expected.narSize} bytes`);
    }
    return parseFailure('nar', e.message);
  }
  if (digest.narSize !== expected.narSize) {
    return parseFailure('NarSize', `the NAR has ${digest.narSize} bytes, the narinfo says ${expected.narSize}`);
  }
  if (digest.narHash !== expected.narHash) {
    return parseFailure('NarHash', `the NAR hashes to ${digest.narHash}, the narinfo says ${expected.narHash}`);
  }
  return parsedOk(digest);
}
