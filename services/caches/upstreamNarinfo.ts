// What kiln makes of a narinfo an upstream cache answered: served only when one of its signatures
// is valid under the upstream's configured key, with its URL pointing back through kiln, and with
// the cache's own signature added beside the upstream's.
//
// Why both signatures: Nix accepts a narinfo when any one Sig line verifies under a key it
// trusts. A client told to trust only the kiln cache's key (the usual setup) accepts the added
// signature; a client that also trusts the upstream's key (cache.nixos.org's is trusted by
// default) accepts the original one. The cache vouches only for what it verified: the signed
// fingerprint covers NarHash and NarSize, and Nix checks the NAR it downloads against them, so
// proxied bytes cannot be swapped even though kiln does not store or hash them itself.
import { parseNarinfo, renderNarinfo, signNarinfo, narinfoFingerprint, type SigningKey, type VerifyingKey } from '../../protocol/index.js';

/** A path below an upstream's root that kiln proxies: plain segments, no dot segments, no query. */
const RELATIVE_FILE = /^[A-Za-z0-9_+-][A-Za-z0-9._+-]*(\/[A-Za-z0-9_+-][A-Za-z0-9._+-]*)*$/;

export const isProxiablePath = (path: string): boolean => RELATIVE_FILE.test(path) && path.length <= 500;

/**
 * Where the cache serves the NAR file of an upstream's narinfo:
 * `upstream/<upstream id>/<hash part>/<path below the upstream's root>`. The hash part lets any
 * server process check that the file is the one a verified narinfo names (upstreams.ts), so the
 * proxy never fetches a URL nobody signed for.
 */
export const proxiedUrl = (upstreamId: string, hashPart: string, path: string): string => `upstream/${upstreamId}/${hashPart}/${path}`;

export type UpstreamNarinfoResult =
  | { ok: true; text: string }
  | { ok: false; reason: string };

export interface UpstreamSource {
  id: string;
  /** the upstream's root URL, without a trailing slash */
  url: string;
  key: VerifyingKey;
}

/** Checks and rewrites the narinfo text `body` an upstream answered for `hashPart`. */
export function adoptUpstreamNarinfo(body: string, hashPart: string, upstream: UpstreamSource, signingKey: SigningKey): UpstreamNarinfoResult {
  const parsed = parseNarinfo(body);
  if (!parsed.ok) return { ok: false, reason: `its narinfo is malformed (${parsed.field}: ${parsed.reason})` };
  const info = parsed.value;
  const base = info.storePath.slice(info.storePath.lastIndexOf('/') + 1);
  if (!base.startsWith(`${hashPart}-`)) return { ok: false, reason: `it answered ${hashPart}.narinfo with the narinfo of ${info.storePath}` };
  let fingerprint: string;
  try {
    fingerprint = narinfoFingerprint(info);
  } catch (e) {
    return { ok: false, reason: (e as Error).message };
  }
  const valid = info.sigs.filter((sig) => upstream.key.verify(fingerprint, sig));
  if (valid.length === 0) return { ok: false, reason: `the narinfo of ${info.storePath} has no valid signature by ${upstream.key.name}` };

  let url = info.url;
  if (url.startsWith(`${upstream.url}/`)) url = url.slice(upstream.url.length + 1);
  // An absolute URL elsewhere is left as it is: the client fetches it from there itself.
  if (!/^[a-z][a-z0-9+.-]*:/i.test(url)) {
    if (!isProxiablePath(url)) return { ok: false, reason: `its narinfo URL ${JSON.stringify(info.url)} is not a plain relative path` };
    url = proxiedUrl(upstream.id, hashPart, url);
  }
  const text = renderNarinfo({ ...info, url, sigs: [...valid, signNarinfo(info, signingKey)] });
  return { ok: true, text };
}
