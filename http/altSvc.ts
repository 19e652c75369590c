// useQuic ("advertise HTTP/3 (QUIC) to clients"): every answer carries an Alt-Svc header naming
// HTTP/3 on the public port of serveUrl, so browsers and HTTP/3-capable clients move to QUIC on
// their next connection. kiln itself speaks HTTP/1.1 (uWS has no HTTP/3): what answers QUIC on that
// UDP port is the reverse proxy in front of it (docs/http.md, "HTTP/3"). A client that finds no
// QUIC there keeps using TCP, so a wrong advertisement costs one failed attempt, not an outage.
import type { Config } from '../config/index.js';
import type { Headers } from './reply.js';

/** A day: what a client remembers the advertisement for (RFC 7838 `ma`). */
const MAX_AGE_SECS = 86_400;

export function altSvcHeaders(config: Pick<Config, 'useQuic' | 'serveUrl'>): Headers {
  if (!config.useQuic) return {};
  const url = new URL(config.serveUrl);
  return { 'alt-svc': `h3=":${url.port || '443'}"; ma=${MAX_AGE_SECS}` };
}
