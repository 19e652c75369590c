// The client's address of a request a serving thread forwards to the main thread (docs/http.md,
// "Serving threads"). The thread connects from loopback, so it names the real peer in a header
// that carries this process's random secret: a client cannot forge it (the thread drops any copy a
// client sends), and `http.trustedProxies` keeps its meaning for proxies in front of kiln.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { normalizeAddress } from '../clientAddress.js';

export const FORWARDED_PEER_HEADER = 'x-kiln-thread-peer';

/** Made once per process; serving threads are given it when they start. */
const PROCESS_SECRET = randomBytes(24).toString('base64url');
const SECRET_BYTES = Buffer.from(PROCESS_SECRET);

export function forwardingSecret(): string {
  return PROCESS_SECRET;
}

/** The header value a thread sends for `peer`, with the secret it was given. */
export function forwardedPeerValue(secret: string, peer: string): string {
  return `${secret} ${peer}`;
}

/** The forwarded peer when `value` carries this process's secret; undefined otherwise. */
export function forwardedPeer(value: string | undefined): string | undefined {
  if (value === undefined || value === '') return undefined;
  const space = value.indexOf(' ');
  if (space !== SECRET_BYTES.length) return undefined;
  if (!timingSafeEqual(Buffer.from(value.slice(0, space)), SECRET_BYTES)) return undefined;
  // the thread sends what its uWS socket prints (an IPv4 peer as 0000:…:ffff:7f00:0001): spelled as
  // a peer of the main thread's own listener is, or limits and checks per address would see another key
  return normalizeAddress(value.slice(space + 1));
}
