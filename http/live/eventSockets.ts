// The event WebSockets: the firehose (/api/v1/metrics/events), the live paths, and the supervision
// tree's transitions (/api/v1/admin/actors/live).
//
// What needs no database (the path, the globs, a token being there at all) is checked in the
// upgrade handler: a failure is an HTTP error with the usual JSON envelope. The upgrade itself
// happens at once, inside uWS's own handler: completing an upgrade later under res.cork() can
// close the fresh socket (uWebSockets issue 1928, fixed upstream in PR 1929, not in the build kiln
// uses). The token and the permission are checked right after the socket opens; until then it is
// subscribed to nothing. Then the socket gets stream.open and its events, or a close with code
// 4000 + the HTTP status (4401, 4403, 4404) and the reason "<error code>: <message>". A firehose
// socket gets stream.open only when its globs match that name.
import { STATUS_CODES } from 'node:http';
import type { HttpRequest, HttpResponse, TemplatedApp, WebSocket, us_socket_context_t } from 'uWebSockets.js';
import type { Logger } from 'pino';
import { ApiError, isApiError, renderEnvelope } from '../../protocol/index.js';
import { checkLiveRequest, type EventStreams, type LiveFeed, type LiveRequest, type Principal } from '../../services/index.js';
import type { EventBus } from '../../storage/index.js';
import type { ActorTransition } from '../../supervisors/index.js';
import { CidrSet, clientAddress, forwardedForOf, normalizeAddress } from '../clientAddress.js';
import { FORWARDED_PEER_HEADER, forwardedPeer } from '../serving/forwardedPeer.js';
import { FirehoseHub, type FirehoseSocketData } from './firehose.js';
import { LiveLag, type LiveLagSocketData } from './liveLag.js';
import { ACTORS_TOPIC, eventTopics, feedTopics } from './liveTopics.js';
import { LIVE_PATHS, decodeParam, socketToken, type LivePath } from './socketRequest.js';

export interface EventSocketsOptions {
  bus: EventBus;
  streams: EventStreams;
  authenticateToken(token: string, peerAddress: string): Promise<Principal>;
  trustedProxies: readonly string[];
  log: Logger;
  /** unsent bytes past which a firehose or live subscriber lags (default 1 MiB) */
  lagBytes?: number;
  /** The supervision tree's steps for /admin/actors/live (root.onTransition); returns the unsubscribing. */
  actorTransitions?(listener: (transition: ActorTransition) => void): () => void;
}

interface SocketData extends FirehoseSocketData, LiveLagSocketData {
  request: LiveRequest;
  token: string;
  address: string;
  feed: LiveFeed | null;
  closed: boolean;
}

export interface EventSockets {
  /** http/server.ts's `websockets` hook */
  register(app: TemplatedApp): void;
  /** stops publishing (before the HTTP server closes) */
  close(): void;
  /** firehose subscribers of this process */
  readonly firehoseSubscribers: number;
}

// A close reason is at most 123 bytes (RFC 6455, 5.5: control frame payloads of 125 bytes).
const REASON_BYTES = 123;

function closeReason(e: ApiError): string {
  let reason = `${e.code}: ${e.message}`;
  while (Buffer.byteLength(reason) > REASON_BYTES) reason = reason.slice(0, -1);
  return reason;
}

export function eventSockets(opts: EventSocketsOptions): EventSockets {
  const lagBytes = opts.lagBytes ?? 1024 * 1024;
  const hub = new FirehoseHub(lagBytes);
  const liveLag = new LiveLag(lagBytes);
  const trusted = new CidrSet(opts.trustedProxies);
  let unsubscribe: (() => void) | null = null;
  let unsubscribeActors: (() => void) | null = null;

  const asApiError = (error: unknown): ApiError => {
    if (isApiError(error)) return error;
    opts.log.error({ err: error }, 'a live socket could not be authorised');
    return new ApiError('internal', 'internal error while opening a live socket');
  };

  function upgrade(path: LivePath, paramNames: readonly string[]) {
    return (res: HttpResponse, req: HttpRequest, context: us_socket_context_t) => {
      const query = new URLSearchParams(req.getQuery() ?? '');
      const forwarded = forwardedForOf(req);
      const peer = forwardedPeer(req.getHeader(FORWARDED_PEER_HEADER)) ?? normalizeAddress(Buffer.from(res.getRemoteAddressAsText()).toString());
      let data: SocketData;
      try {
        const request = path.request(paramNames.map((name, i) => decodeParam(req.getParameter(i) ?? '', name)), query);
        checkLiveRequest(request);
        const token = socketToken(req.getHeader('authorization'), query);
        data = { request, token, address: clientAddress(peer, forwarded, trusted), feed: null, closed: false };
      } catch (error) {
        const e = asApiError(error);
        res.writeStatus(`${e.status} ${STATUS_CODES[e.status] ?? ''}`)
          .writeHeader('content-type', 'application/json')
          .end(JSON.stringify({ error: true, message: e.message, code: e.code }));
        return;
      }
      res.upgrade(data, req.getHeader('sec-websocket-key'), req.getHeader('sec-websocket-protocol'), req.getHeader('sec-websocket-extensions'), context);
    };
  }

  async function authorise(ws: WebSocket<SocketData>): Promise<void> {
    const data = ws.getUserData();
    let feed: LiveFeed;
    try {
      const who = await opts.authenticateToken(data.token, data.address);
      feed = await opts.streams.authorize(who, data.request);
    } catch (error) {
      const e = asApiError(error);
      if (!data.closed) ws.end(4000 + e.status, closeReason(e));
      return;
    }
    if (data.closed) return;
    data.feed = feed;
    if (feed.kind === 'firehose') {
      // The firehose sends only what its globs match, and stream.lagged (spec: Firehose): a client
      // that wants to know when it is subscribed asks for stream.open (`stream.*`, `*`, no globs).
      if (hub.join(ws, feed.globs)('stream.open')) ws.send(renderEnvelope('stream.open', Date.now(), { feed: 'firehose', events: feed.globs }));
      return;
    }
    liveLag.join(ws, feedTopics(feed));
    ws.send(renderEnvelope('stream.open', Date.now(), { feed: feed.kind }));
  }

  return {
    register(app) {
      for (const path of LIVE_PATHS) {
        const paramNames = path.pattern.split('/').filter((s) => s.startsWith(':')).map((s) => s.slice(1));
        const firehose = path.pattern === '/api/v1/metrics/events';
        app.ws<SocketData>(path.pattern, {
          // kiln decides lag itself (firehose.ts, liveLag.ts); uWS drops only far beyond that.
          maxBackpressure: lagBytes + 16 * 1024 * 1024,
          closeOnBackpressureLimit: false,
          maxPayloadLength: 4096,
          idleTimeout: 120,
          sendPingsAutomatically: true,
          upgrade: upgrade(path, paramNames),
          // uWS does not drain microtasks after its callbacks (docs/http.md): run from a macrotask.
          open: (ws: WebSocket<SocketData>) => {
            setImmediate(() => void authorise(ws));
          },
          // Clients have nothing to say; their messages are ignored.
          message: () => undefined,
          drain: (ws: WebSocket<SocketData>) => (firehose ? hub.drain(ws) : liveLag.drain(ws)),
          close: (ws: WebSocket<SocketData>) => {
            const data = ws.getUserData();
            data.closed = true;
            if (data.feed?.kind === 'firehose') hub.leave(ws);
            else liveLag.leave(ws);
          },
        });
      }
      unsubscribe = opts.bus.subscribe((event) => {
        const topics = eventTopics(event);
        for (const topic of topics) app.publish(topic, event.frame);
        liveLag.observe(topics);
        hub.publish(event);
      });
      // Not bus events: the tree is this process's, so its steps go only to this process's sockets.
      unsubscribeActors = opts.actorTransitions?.((transition) => {
        // Rendered only for a watcher: every job's steps come here, thousands a second at full dispatch (issue 23).
        if (app.numSubscribers(ACTORS_TOPIC) === 0) return;
        app.publish(ACTORS_TOPIC, renderEnvelope('actor.transition', transition.at, { ...transition }));
        liveLag.observe([ACTORS_TOPIC]);
      }) ?? null;
    },
    close() {
      unsubscribe?.();
      unsubscribe = null;
      unsubscribeActors?.();
      unsubscribeActors = null;
    },
    get firehoseSubscribers() {
      return hub.size;
    },
  };
}
