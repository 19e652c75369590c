// worker.useTls (default true): the tokens a worker sends (its peer tokens, in the handshake) and
// receives (a server's token, before a discoverable worker's upgrade) travel whole (docs/proto.md
// explains why), so they cross a network only inside TLS. kiln's worker speaks plain ws:// itself:
// TLS is a reverse proxy's (the server's, or the worker's own at worker.domain). Off, the operator
// vouches for the network, and the worker only warns.
import type { PeerTokens } from '../protocol/index.js';

const LOOPBACK_HOST = /^(localhost|127(\.\d{1,3}){3}|\[::1\]|::1)$/;

/** Why the worker must not send its peer tokens to worker.serverUrl, or undefined. */
export function insecureTransportProblem(serverUrl: string, peers: PeerTokens | null, useTls: boolean): string | undefined {
  if (peers === null || !useTls) return undefined;
  const url = new URL(serverUrl);
  if (url.protocol === 'wss:' || LOOPBACK_HOST.test(url.hostname)) return undefined;
  return `worker.serverUrl ${url.protocol}//${url.host} is neither wss:// nor this host, and the handshake would send the peer tokens of worker.peersFile in the clear; use wss:// (TLS at the server's reverse proxy), or set worker.useTls false on a network you trust`;
}

/** Why a discoverable worker must not listen on worker.listenAddr, or undefined. */
export function insecureListenerProblem(listenAddr: string, useTls: boolean): string | undefined {
  if (!useTls || LOOPBACK_HOST.test(listenAddr)) return undefined;
  return `worker.listenAddr ${listenAddr} would take servers' tokens in plain ws:// from the network; keep the listener on loopback behind a reverse proxy that terminates TLS (worker.domain), or set worker.useTls false on a network you trust`;
}
