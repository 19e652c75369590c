// Read tokens for private caches, handed to workers inside a build job so Nix can substitute from
// the project's private caches (docs/builds.md, "Private caches in build jobs"). A token is the
// secret box's sealing (AES-256-GCM, one key per installation, so every server process accepts
// it) of the cache ids it opens and its expiry: nothing is stored, and it cannot be altered or
// widened. It is used as the HTTP Basic password like a session token or API key, and only reads.
import { z } from 'zod';
import type { SecretBox } from '../../storage/index.js';

const PREFIX = 'KCR';
const Claims = z.strictObject({ caches: z.array(z.uuid()).min(1).max(64), exp: z.int() });

export const looksLikeCacheReadToken = (password: string): boolean => password.startsWith(PREFIX);

/** A token that reads `cacheIds` until `ttlSecs` from now. */
export function mintCacheReadToken(box: SecretBox, cacheIds: readonly string[], ttlSecs: number, now = Date.now()): string {
  const claims = { caches: [...cacheIds], exp: Math.floor(now / 1000) + ttlSecs };
  return PREFIX + box.seal(Buffer.from(JSON.stringify(claims))).toString('base64url');
}

/** True when `token` is ours, unexpired, and opens the cache `cacheId`. */
export function cacheReadTokenOpens(box: SecretBox, token: string, cacheId: string, now = Date.now()): boolean {
  if (!looksLikeCacheReadToken(token)) return false;
  let claims;
  try {
    claims = Claims.parse(JSON.parse(box.open(Buffer.from(token.slice(PREFIX.length), 'base64url')).toString('utf8')));
  } catch {
    return false;
  }
  return claims.exp * 1000 > now && claims.caches.includes(cacheId);
}

/** The password of an HTTP Basic Authorization header, or null. */
export function basicPassword(header: string | undefined): string | null {
  const basic = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header ?? '');
  if (!basic) return null;
  const decoded = Buffer.from(basic[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? null : decoded.slice(colon + 1);
}
