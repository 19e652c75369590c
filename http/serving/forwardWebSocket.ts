// WebSockets (/proto, live sockets) that reach a serving thread are relayed to the main thread's
// loopback listener, which owns the sockets' state (docs/http.md, "Serving threads"). The thread
// opens the upstream socket first and upgrades the client only once it is open (lateUpgrades.ts), so
// a refusal (401, 404, server_full) reaches the client as the main thread wrote it. Each direction pauses
// its source while the other side's buffer is over RELAY_HIGH_WATER.
import type { HttpRequest, HttpResponse, TemplatedApp, WebSocket as UwsSocket, us_socket_context_t } from 'uWebSockets.js';
import WebSocket from 'ws';
import { FORWARDED_PEER_HEADER, forwardedPeerValue } from './forwardedPeer.js';
import type { ForwardOrigin } from './forwardHttp.js';
import type { LateUpgrades } from './lateUpgrades.js';

const RELAY_HIGH_WATER = 4 * 1024 * 1024;
/** Headers the ws client writes itself for the upstream handshake. */
const SKIP = new Set(['connection', 'upgrade', 'sec-websocket-key', 'sec-websocket-version', 'sec-websocket-extensions', 'sec-websocket-protocol', 'host', 'content-length', 'transfer-encoding', FORWARDED_PEER_HEADER]);

interface Relay {
  upstream: WebSocket;
  client: UwsSocket<RelayData> | null;
  /** uWS closed the client's socket: touching it now throws (and would end the thread) */
  clientGone: boolean;
  closed: boolean;
  /** the upstream's close, when it came before the client's upgrade: passed on right after it */
  ending: { code: number; reason: Buffer } | null;
}

/**
 * The client socket's user data. uWS copies the properties of the object given to upgrade() into a
 * new one, so the relay is held by reference: the upgrade's closures and the socket's handlers then
 * share it (a relay given directly never learned its client, and nothing from the main thread,
 * messages or its close, reached the client).
 */
interface RelayData {
  relay: Relay;
}

/** A close code a peer may send (RFC 6455 §7.4): 1005/1006/1015 only describe what happened. */
const sendableCode = (code: number): number => (code >= 1000 && code <= 4999 && code !== 1005 && code !== 1006 && code !== 1015 ? code : 1000);

export function relayWebSockets(app: TemplatedApp, origin: ForwardOrigin, late: LateUpgrades): void {
  app.ws<RelayData>('/*', {
    compression: 0,
    // The main thread enforces each route's own frame limits; the relay only must not be the smaller.
    maxPayloadLength: 64 * 1024 * 1024,
    maxBackpressure: 64 * 1024 * 1024,
    closeOnBackpressureLimit: false,
    idleTimeout: 0,
    sendPingsAutomatically: false,
    upgrade: (res: HttpResponse, req: HttpRequest, context: us_socket_context_t) => {
      const query = req.getQuery();
      const path = query ? `${req.getUrl()}?${query}` : req.getUrl();
      const key = req.getHeader('sec-websocket-key');
      const protocolHeader = req.getHeader('sec-websocket-protocol');
      const headers: Record<string, string> = {};
      // repeats joined, as forwardHttp.ts does: a proxy's own X-Forwarded-For line follows the client's
      req.forEach((k, v) => {
        if (!SKIP.has(k)) headers[k] = headers[k] === undefined ? v : `${headers[k]}, ${v}`;
      });
      headers[FORWARDED_PEER_HEADER] = forwardedPeerValue(origin.secret, Buffer.from(res.getRemoteAddressAsText()).toString());
      const protocols = protocolHeader === '' ? [] : protocolHeader.split(',').map((p) => p.trim());
      let aborted = false;
      // An all-zero mask: ws then skips masking, which it does in JavaScript (no bufferutil), ~1.8 ms
      // of CPU a MiB, most of a relayed NAR push's cost (256 MiB: 435-509 → 69-81 ms, bench/README.md
      // "relay masking"). RFC 6455 masks client frames against intermediaries' caches; this hop is
      // the process's own loopback connection, with none.
      const upstream = new WebSocket(`ws://127.0.0.1:${origin.port}${path}`, protocols, {
        headers, perMessageDeflate: false, maxPayload: 64 * 1024 * 1024, generateMask: (mask: Buffer) => mask.fill(0),
      });
      const early: { data: Buffer; binary: boolean }[] = [];
      const relay: Relay = { upstream, client: null, clientGone: false, closed: false, ending: null };
      upstream.on('message', (data: Buffer, binary: boolean) => {
        // Frames still on their way after the client left (its close goes upstream meanwhile).
        if (relay.clientGone) return;
        if (relay.client === null) {
          early.push({ data, binary });
          return;
        }
        relay.client.send(data, binary);
        if (relay.client.getBufferedAmount() > RELAY_HIGH_WATER) upstream.pause();
      });
      res.onAborted(() => {
        aborted = true;
        upstream.terminate();
      });
      upstream.once('open', () => {
        if (aborted) return;
        // Not under res.cork(): lateUpgrades.ts says why.
        late.run(() => {
          // Gone, or answered 502 meanwhile (an upstream error: closed with nothing to pass on).
          if (aborted || (relay.closed && relay.ending === null)) return;
          res.upgrade<RelayData>({ relay }, key, upstream.protocol, '', context);
          for (const m of early) relay.client?.send(m.data, m.binary);
          if (relay.ending !== null) relay.client?.end(sendableCode(relay.ending.code), relay.ending.reason);
        });
      });
      upstream.once('unexpected-response', (_request, answer) => {
        const chunks: Buffer[] = [];
        answer.on('data', (c: Buffer) => chunks.push(c));
        answer.on('end', () => {
          if (aborted) return;
          res.cork(() => {
            res.writeStatus(`${answer.statusCode ?? 502} ${answer.statusMessage ?? ''}`);
            const type = answer.headers['content-type'];
            if (typeof type === 'string') res.writeHeader('Content-Type', type);
            const challenge = answer.headers['www-authenticate'];
            if (typeof challenge === 'string') res.writeHeader('WWW-Authenticate', challenge);
            res.end(Buffer.concat(chunks));
          });
        });
      });
      upstream.on('error', () => {
        if (aborted || relay.client !== null || relay.closed) return;
        relay.closed = true;
        res.cork(() => res.writeStatus('502 Bad Gateway').end());
      });
      upstream.on('close', (code: number, reason: Buffer) => {
        if (relay.closed || relay.clientGone) return;
        relay.closed = true;
        if (relay.client === null) relay.ending = { code, reason };
        else relay.client.end(sendableCode(code), reason);
      });
    },
    open: (ws) => {
      ws.getUserData().relay.client = ws;
    },
    message: (ws, message, binary) => {
      const { upstream } = ws.getUserData().relay;
      // uWS reuses the message's memory after this call: copy it.
      upstream.send(Buffer.from(message.slice(0)), { binary });
    },
    drain: (ws) => {
      if (ws.getBufferedAmount() < RELAY_HIGH_WATER) ws.getUserData().relay.upstream.resume();
    },
    close: (ws, code, reason) => {
      const { relay } = ws.getUserData();
      relay.clientGone = true;
      if (relay.closed) return;
      relay.closed = true;
      relay.upstream.close(sendableCode(code), Buffer.from(reason.slice(0)));
    },
  });
}
