// The /proto WebSocket route on uWS (docs/proto.md). Binary frames only, no compression. uWS
// closes a frame over maxPayloadLength without a reason, so that limit is twice the protocol's
// cap and the codec refuses anything between the two with message_too_large.
import type { TemplatedApp, WebSocket } from 'uWebSockets.js';
import type { Logger } from 'pino';
import { closeFrameFor, DEFAULT_MAX_MESSAGE_BYTES, HEARTBEAT_INTERVAL_SECS, type ProtoLimits } from '../../protocol/index.js';
import type { WorkerAuth, WorkerConnections } from '../../services/index.js';
import { normalizeAddress } from '../clientAddress.js';
import { FORWARDED_PEER_HEADER, forwardedPeer } from '../serving/forwardedPeer.js';
import { ProtoConnection } from './protoConnection.js';

export interface ProtoRouteOptions {
  auth: WorkerAuth;
  workers: WorkerConnections;
  log: Logger;
  software: string;
  maxConnections: number;
  /** proto.discoverable: false refuses every incoming connection; dialled ones still run */
  discoverable: boolean;
  heartbeatTimeoutSecs: number;
  narChunkBytes: number;
  narSendChunkTimeoutSecs: number;
  /** tests shorten it */
  handshakeTimeoutSecs?: number;
}

export interface ProtoRoute {
  register(app: TemplatedApp): void;
  /** closes every connection with shutting_down and stops the heartbeat sweep */
  close(): void;
  /**
   * Opens /proto to a discoverable worker at `url` with `headers` (its token); the connection then
   * runs exactly as an incoming one. Resolves with the close once the socket is gone.
   */
  dial(url: string, headers: Record<string, string>): Promise<{ code: number; reason: string }>;
  readonly connections: number;
}

interface SocketData {
  connection: ProtoConnection | null;
  address: string;
  /** uWS throws on a closed socket; either side's close sets this */
  ended: boolean;
  /** frames sent in this turn, not written yet: they go out together, corked (one write, not one per frame) */
  pending: Uint8Array[];
}

/**
 * Writes a socket's pending frames under one cork. Sends come from setImmediate and promise
 * continuations, outside uWS's own callbacks, where uWS writes each frame with a syscall of its
 * own; a dispatch pass sends hundreds of jobs in one turn, so they are queued and flushed together.
 */
function flushFrames(ws: WebSocket<SocketData>, data: SocketData): void {
  const frames = data.pending;
  if (frames.length === 0) return;
  data.pending = [];
  if (data.ended) return;
  ws.cork(() => {
    for (const bytes of frames) ws.send(bytes, true);
  });
}

const isLoopback = (address: string) => address === '127.0.0.1' || address === '::1' || address.startsWith('127.');

export function protoRoute(opts: ProtoRouteOptions): ProtoRoute {
  const limits: ProtoLimits = {
    maxMessageBytes: DEFAULT_MAX_MESSAGE_BYTES,
    // Every 10 s (spec, Limits), but at least three beats per timeout, so a shortened timeout
    // (tests, small deployments) does not declare a healthy idle worker dead.
    heartbeatIntervalSecs: opts.heartbeatTimeoutSecs > 0
      ? Math.max(1, Math.min(HEARTBEAT_INTERVAL_SECS, Math.floor(opts.heartbeatTimeoutSecs / 3)))
      : HEARTBEAT_INTERVAL_SECS,
    heartbeatTimeoutSecs: opts.heartbeatTimeoutSecs,
    narChunkBytes: opts.narChunkBytes,
    narSendChunkTimeoutSecs: opts.narSendChunkTimeoutSecs,
  };
  const open = new Set<ProtoConnection>();
  let sweep: NodeJS.Timeout | null = null;

  return {
    register(app) {
      app.ws<SocketData>('/proto', {
        compression: 0,
        maxPayloadLength: limits.maxMessageBytes * 2,
        maxBackpressure: 64 * 1024 * 1024,
        closeOnBackpressureLimit: false,
        idleTimeout: 0,
        sendPingsAutomatically: false,
        upgrade: (res, req, context) => {
          const address = forwardedPeer(req.getHeader(FORWARDED_PEER_HEADER)) ?? normalizeAddress(Buffer.from(res.getRemoteAddressAsText()).toString());
          res.upgrade<SocketData>(
            { connection: null, address, ended: false, pending: [] },
            req.getHeader('sec-websocket-key'), req.getHeader('sec-websocket-protocol'), req.getHeader('sec-websocket-extensions'), context,
          );
        },
        open: (ws: WebSocket<SocketData>) => {
          const data = ws.getUserData();
          if (!opts.discoverable) {
            const frame = closeFrameFor('not_discoverable', 'this server accepts no incoming /proto connections (proto.discoverable is false)');
            ws.end(frame.closeCode, frame.closeReason);
            return;
          }
          if (open.size >= opts.maxConnections) {
            const frame = closeFrameFor('server_full', `${opts.maxConnections} /proto connections are open (proto.maxConnections)`);
            ws.end(frame.closeCode, frame.closeReason);
            return;
          }
          const connection = new ProtoConnection(
            {
              send: (bytes) => {
                if (data.ended) return;
                data.pending.push(bytes);
                if (data.pending.length === 1) queueMicrotask(() => flushFrames(ws, data));
              },
              end: (code, reason) => {
                if (data.ended) return;
                // what was sent before the close (a reject) goes first
                flushFrames(ws, data);
                data.ended = true;
                ws.end(code, reason);
              },
            },
            data.address, isLoopback(data.address),
            { auth: opts.auth, workers: opts.workers, limits, software: opts.software, log: opts.log, ...(opts.handshakeTimeoutSecs ? { handshakeTimeoutSecs: opts.handshakeTimeoutSecs } : {}) },
          );
          data.connection = connection;
          open.add(connection);
        },
        message: (ws: WebSocket<SocketData>, message: ArrayBuffer, isBinary: boolean) => {
          const connection = ws.getUserData().connection;
          // uWS reuses the buffer after this callback returns, and does not drain microtasks (docs/http.md).
          const copy = Buffer.from(message.slice(0)); // one copy: Buffer.from(ArrayBuffer) shares it
          if (connection) setImmediate(() => connection.received(copy, isBinary));
        },
        close: (ws: WebSocket<SocketData>, code: number, message: ArrayBuffer) => {
          const data = ws.getUserData();
          data.ended = true;
          const connection = data.connection;
          const reason = Buffer.from(message).toString('utf8');
          if (!connection) return;
          open.delete(connection);
          setImmediate(() => connection.socketClosed(code, reason));
        },
      });
      if (opts.heartbeatTimeoutSecs > 0) {
        // Silence is the only sign of a worker lost without a TCP close (spec, "States and transitions").
        const every = Math.max(250, Math.min(5000, (opts.heartbeatTimeoutSecs * 1000) / 4));
        sweep = setInterval(() => {
          for (const worker of opts.workers.silent(opts.heartbeatTimeoutSecs)) {
            worker.link.close('heartbeat_timeout', `no message for more than ${opts.heartbeatTimeoutSecs} s`);
          }
        }, every);
        sweep.unref();
      }
    },
    close() {
      if (sweep) clearInterval(sweep);
      for (const connection of open) connection.close('shutting_down', 'the server is stopping', true);
      open.clear();
    },
    get connections() {
      return open.size;
    },
    async dial(url, headers) {
      // ws is loaded at the first dial of a discoverable worker, not by every server (docs/operations.md, "Memory at rest")
      const { WebSocket: ClientSocket } = await import('ws');
      return new Promise((resolve) => {
        const socket = new ClientSocket(url, { headers, perMessageDeflate: false, maxPayload: limits.maxMessageBytes * 2, handshakeTimeout: 10_000 });
        let connection: ProtoConnection | null = null;
        let ended = false;
        socket.on('open', () => {
          const address = normalizeAddress(new URL(url).hostname.replace(/^\[|\]$/g, ''));
          connection = new ProtoConnection(
            {
              send: (bytes) => {
                if (!ended) socket.send(bytes, { binary: true });
              },
              end: (code, reason) => {
                if (ended) return;
                ended = true;
                socket.close(code, reason);
              },
            },
            // a worker this server dialled is never the local worker: no open mode
            address, false,
            { auth: opts.auth, workers: opts.workers, limits, software: opts.software, log: opts.log, ...(opts.handshakeTimeoutSecs ? { handshakeTimeoutSecs: opts.handshakeTimeoutSecs } : {}) },
          );
          open.add(connection);
        });
        socket.on('message', (data: Buffer | ArrayBuffer | Buffer[], isBinary: boolean) => {
          const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
          connection?.received(bytes, isBinary);
        });
        socket.on('unexpected-response', (_req, res) => {
          ended = true;
          resolve({ code: res.statusCode ?? 0, reason: `the worker refused the connection: HTTP ${res.statusCode ?? '?'} ${res.statusMessage ?? ''}`.trim() });
          res.resume();
          socket.terminate();
        });
        socket.on('error', (error) => opts.log.debug({ err: error, url }, 'dialling a worker failed'));
        socket.on('close', (code, reasonBuffer) => {
          ended = true;
          const reason = reasonBuffer.toString('utf8');
          if (connection) {
            open.delete(connection);
            connection.socketClosed(code, reason);
          }
          resolve({ code, reason });
        });
      });
    },
  };
}
