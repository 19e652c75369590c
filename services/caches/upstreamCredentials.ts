// Credentials of a private upstream cache (docs/caches.md, "Upstream caches"): sealed with the
// installation's secret box like webhook secrets and cache keys, opened only to build the
// Authorization header of narinfo, NAR, log and debuginfo requests, never shown by the API.
import type { UpstreamCredentials } from '../../protocol/index.js';
import type { SecretBox } from '../../storage/index.js';

/** What the API shows of the credentials: their kind, never the secret. */
export type UpstreamAuth = 'basic' | 'bearer' | null;

export const sealUpstreamCredentials = (box: SecretBox, credentials: UpstreamCredentials): Buffer =>
  box.seal(Buffer.from(JSON.stringify(credentials), 'utf8'));

export function openUpstreamCredentials(box: SecretBox, sealed: Uint8Array): UpstreamCredentials {
  return JSON.parse(box.open(sealed).toString('utf8')) as UpstreamCredentials;
}

export const upstreamAuthOf = (credentials: UpstreamCredentials): Exclude<UpstreamAuth, null> => ('token' in credentials ? 'bearer' : 'basic');

/** The Authorization header value: `Basic base64(user:password)`, as Nix sends a netrc entry, or `Bearer <token>`. */
export function authorizationOf(credentials: UpstreamCredentials): string {
  if ('token' in credentials) return `Bearer ${credentials.token}`;
  return `Basic ${Buffer.from(`${credentials.user}:${credentials.password}`, 'utf8').toString('base64')}`;
}
