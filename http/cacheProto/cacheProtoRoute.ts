// GET /cache/{cache}/proto, the cache protocol WebSocket on uWS (docs/cache-protocol.md). It lives
// on the main thread: a serving thread relays every WebSocket to it (http/serving/forwardWebSocket.ts).
// What needs no lookup is refused at the upgrade with an HTTP answer: a name no cache may have
// (404), a malformed Authorization header (401), an anonymous client when
// proto.anonymousCache.enable is off (401), an address holding
// proto.anonymousCache.maxConnectionsPerIp anonymous connections, or a server holding
// proto.maxConnections cache protocol connections (429). The upgrade then
// happens at once, inside uWS's handler (a later upgrade under cork can lose the socket: see
// http/live/eventSockets.ts), and the cache's access is decided right after the socket opens:
// `ready`, or a close 4401/4403/4404 as the binary cache paths would answer.
import { STATUS_CODES } from 'node:http';
import type { HttpRequest, HttpResponse, TemplatedApp, WebSocket, us_socket_context_t } from 'uWebSockets.js';
import type { Logger } from 'pino';
import { ApiError, cacheCloseFrame, MAX_CLIENT_FRAME_BYTES, ResourceName } from '../../protocol/index.js';
import type { CacheRouteServices } from '../cache/cacheDeps.js';
import { CidrSet, clientAddress, forwardedForOf, normalizeAddress } from '../clientAddress.js';
import { FORWARDED_PEER_HEADER, forwardedPeer } from '../serving/forwardedPeer.js';
import { AnonymousSlots } from './anonymousSlots.js';
import { CacheProtoConnection } from './cacheProtoConnection.js';

export interface CacheProtoRouteOptions {
  services: CacheRouteServices;
  log: Logger;
  trustedProxies: readonly string[];
  /** proto.anonymousCache.enable */
  anonymousEnabled: boolean;
  /** proto.anonymousCache.maxConnectionsPerIp */
  maxAnonymousPerAddress: number;
  /** proto.maxConnections: cache protocol connections of the whole server (counted apart from /proto's) */
  maxConnections: number;
}

export interface CacheProtoRoute {
  register(app: TemplatedApp): void;
  /** closes every connection with shutting_down */
  close(): void;
  /** cache.changed with a settings reason: the cache's connections that may no longer read it close */
  cacheChanged(name: string): void;
  readonly connections: number;
  /** bytes sent on these connections and not yet written to their clients (what backpressure bounds) */
  readonly unwrittenBytes: number;
}

interface SocketData {
  connection: CacheProtoConnection | null;
  name: string;
  /** the credentials as a Basic header (a Bearer token is passed on as Basic's password); undefined: anonymous */
  authorization: string | undefined;
  address: string;
  /** holds one of its address's anonymous slots */
  slotted: boolean;
  /** uWS throws on a closed socket; either side's close sets this */
  ended: boolean;
  /** frames received and not yet handled */
  inbox: { bytes: Uint8Array; binary: boolean }[];
}

/** The frames uWS itself takes: larger than the protocol's cap, so a frame between the two is refused with a reason. */
const UWS_MAX_PAYLOAD = 1024 * 1024;
const BASIC = /^Basic\s+[A-Za-z0-9+/=]+\s*$/i;
const BEARER = /^Bearer\s+(\S+)\s*$/i;

/**
 * The Authorization header as the binary cache's access check takes it (HTTP Basic, any user name,
 * the token as password), undefined without one; throws for any other form, so that a header the
 * check would read as anonymous never escapes the anonymous bounds.
 */
function cacheCredentials(header: string): string | undefined {
  if (header === '') return undefined;
  if (BASIC.test(header)) return header.trim();
  const bearer = BEARER.exec(header);
  if (bearer) return `Basic ${Buffer.from(`kiln:${bearer[1]!}`).toString('base64')}`;
  throw new ApiError('invalid_token', 'the Authorization header must be "Basic <base64 of user:token>" or "Bearer <token>"', { headers: { 'WWW-Authenticate': 'Basic realm="kiln"' } });
}

function refuse(res: HttpResponse, e: ApiError): void {
  res.writeStatus(`${e.status} ${STATUS_CODES[e.status] ?? ''}`).writeHeader('content-type', 'application/json');
  for (const [name, value] of Object.entries(e.headers ?? {})) res.writeHeader(name, value);
  res.end(JSON.stringify({ error: true, message: e.message, code: e.code }));
}

export function cacheProtoRoute(opts: CacheProtoRouteOptions): CacheProtoRoute {
  const trusted = new CidrSet(opts.trustedProxies);
  const slots = new AnonymousSlots(opts.maxAnonymousPerAddress);
  /** each open connection, with its socket's unwritten bytes */
  const open = new Map<CacheProtoConnection, () => number>();

  const upgrade = (res: HttpResponse, req: HttpRequest, context: us_socket_context_t): void => {
    // Everything is read from req here: it is gone once this handler returns.
    const peer = forwardedPeer(req.getHeader(FORWARDED_PEER_HEADER)) ?? normalizeAddress(Buffer.from(res.getRemoteAddressAsText()).toString());
    const address = clientAddress(peer, forwardedForOf(req), trusted);
    let data: SocketData;
    try {
      let name: string;
      try {
        name = decodeURIComponent(req.getParameter(0) ?? '');
      } catch {
        throw new ApiError('not_found', 'no such cache');
      }
      // A name no cache may have is refused before any lookup.
      if (!ResourceName.safeParse(name).success) throw new ApiError('not_found', 'no such cache');
      const authorization = cacheCredentials(req.getHeader('authorization'));
      if (authorization === undefined) {
        if (!opts.anonymousEnabled) {
          throw new ApiError('unauthorized', 'this server takes no anonymous cache protocol connections (proto.anonymousCache.enable): send an API key or session token', {
            headers: { 'WWW-Authenticate': 'Basic realm="kiln"' },
          });
        }
        if (!slots.hasRoom(address)) {
          throw new ApiError('too_many_connections', `${opts.maxAnonymousPerAddress} anonymous cache protocol connections are open from ${address} (proto.anonymousCache.maxConnectionsPerIp); close one or send credentials`);
        }
      }
      if (open.size >= opts.maxConnections) {
        throw new ApiError('too_many_connections', `${opts.maxConnections} cache protocol connections are open on this server (proto.maxConnections); try again later`);
      }
      data = { connection: null, name, authorization, address, slotted: false, ended: false, inbox: [] };
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      refuse(res, error);
      return;
    }
    res.upgrade(data, req.getHeader('sec-websocket-key'), req.getHeader('sec-websocket-protocol'), req.getHeader('sec-websocket-extensions'), context);
  };

  return {
    register(app) {
      app.ws<SocketData>('/cache/:cache/proto', {
        compression: 0,
        maxPayloadLength: UWS_MAX_PAYLOAD,
        // The connection waits for the socket to drain past 1 MiB (SEND_HIGH_WATER); only a client
        // that stops reading one huge answer gets this far, and is then dropped.
        maxBackpressure: 128 * 1024 * 1024,
        closeOnBackpressureLimit: true,
        idleTimeout: 120,
        sendPingsAutomatically: true,
        upgrade,
        open: (ws: WebSocket<SocketData>) => {
          const data = ws.getUserData();
          if (open.size >= opts.maxConnections) {
            // filled between the upgrade and the open
            const frame = cacheCloseFrame('too_many_connections', `${opts.maxConnections} cache protocol connections are open on this server (proto.maxConnections)`);
            data.ended = true;
            ws.end(frame.closeCode, frame.closeReason);
            return;
          }
          if (data.authorization === undefined) {
            // Taken at the open, where the count is certain (between upgrade and open another socket may have opened).
            if (!slots.take(data.address)) {
              const frame = cacheCloseFrame('too_many_connections', `${opts.maxAnonymousPerAddress} anonymous connections are open from ${data.address} (proto.anonymousCache.maxConnectionsPerIp)`);
              data.ended = true;
              ws.end(frame.closeCode, frame.closeReason);
              return;
            }
            data.slotted = true;
          }
          const connection = new CacheProtoConnection(
            {
              send: (bytes) => {
                if (data.ended) return;
                ws.cork(() => ws.send(bytes, true));
              },
              bufferedAmount: () => (data.ended ? 0 : ws.getBufferedAmount()),
              end: (code, reason) => {
                if (data.ended) return;
                data.ended = true;
                ws.end(code, reason);
              },
            },
            { services: opts.services, log: opts.log },
            data.name, data.authorization, data.address,
          );
          data.connection = connection;
          open.set(connection, () => (data.ended ? 0 : ws.getBufferedAmount()));
          // uWS does not drain microtasks after its callbacks (docs/http.md): run from a macrotask.
          setImmediate(() => connection.start());
        },
        message: (ws: WebSocket<SocketData>, message: ArrayBuffer, isBinary: boolean) => {
          const data = ws.getUserData();
          const connection = data.connection;
          if (!connection) return;
          // uWS reuses the buffer after this callback returns. The frames of one read are handled
          // together in one macrotask (uWS does not drain microtasks after its callbacks).
          data.inbox.push({ bytes: new Uint8Array(message.slice(0)), binary: isBinary });
          if (data.inbox.length === 1) {
            setImmediate(() => {
              for (const frame of data.inbox.splice(0)) connection.received(frame.bytes, frame.binary);
            });
          }
        },
        drain: (ws: WebSocket<SocketData>) => {
          const connection = ws.getUserData().connection;
          if (connection) setImmediate(() => connection.drained());
        },
        close: (ws: WebSocket<SocketData>) => {
          const data = ws.getUserData();
          data.ended = true;
          if (data.slotted) slots.release(data.address);
          data.slotted = false;
          const connection = data.connection;
          if (!connection) return;
          open.delete(connection);
          connection.socketClosed();
        },
      });
    },
    close() {
      for (const connection of open.keys()) connection.close('shutting_down', 'the server is stopping');
      open.clear();
    },
    cacheChanged(name) {
      // After this process's access memo has forgotten the cache (it hears the same event).
      setImmediate(() => {
        for (const connection of open.keys()) connection.cacheChanged(name);
      });
    },
    get connections() {
      return open.size;
    },
    get unwrittenBytes() {
      let sum = 0;
      for (const unwritten of open.values()) sum += unwritten();
      return sum;
    },
  };
}
