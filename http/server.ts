// Starting and stopping the uWS HTTP server.
import uWS from 'uWebSockets.js';
import type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import type { Logger } from 'pino';
import { ApiError, isApiError } from '../protocol/index.js';
import { BodyEnd, BodyStream, bufferBody } from './body.js';
import type { MinimumBodyRate, TimerClock } from './bodyRate.js';
import { CidrSet, clientAddress, normalizeAddress } from './clientAddress.js';
import { DEFAULT_DRAIN, refuseWhileDraining, type DrainBounds } from './drain.js';
import { requestFraming } from './framing.js';
import { errorReply, isReply, jsonReply, type Headers, type Reply } from './reply.js';
import { Req } from './request.js';
import { FORWARDED_PEER_HEADER, forwardedPeer } from './serving/forwardedPeer.js';
import { ResponseState, respond, respondComplete, respondInCallback, setAlwaysHeaders } from './respond.js';
import type { AuthMode, Method, RouteTable } from './router.js';

export interface HttpServerOptions<P> {
  listenAddr: string;
  port: number;
  maxRequestSize: number;
  trustedProxies: readonly string[];
  log: Logger;
  routes: RouteTable<P>;
  /** The principal of routes with auth 'none', set without waiting. */
  anonymous: P;
  /** Resolves the principal for a request, or throws ApiError(401/403). */
  authenticate(req: Req<P>, mode: AuthMode): Promise<P>;
  /** upload.minBytesPerSec over streamed bodies, and the clock it is measured with (tests move it) */
  minimumBodyRate?: { limits: MinimumBodyRate; clock: TimerClock };
  /** Registers WebSocket routes (uWS matches them before the catch-all). */
  websockets?(app: TemplatedApp): void;
  /** How long a refused request's body is read and dropped before the connection closes (drain.ts). */
  drain?: DrainBounds;
  /** Hears of a request that failed with an unexpected error (a 500): error reports (errorReport.*). Never the request's headers or body. */
  onUnexpectedError?: (error: unknown, context: { request: string; method: string; route: string }) => void;
  /** Hears of every answer (kiln_http_request_duration_seconds): its route group, method, status and seconds taken. */
  observe?: RequestObserver;
  /** Headers every answer carries (useQuic: `alt-svc`, docs/http.md "HTTP/3"). */
  alwaysHeaders?: Headers;
  /** Also listen on a loopback port of its own, where serving threads relay what they do not answer (http/serving/). */
  origin?: boolean;
  /**
   * False: only the loopback origin listens, `port` is the serving threads' alone (with threads,
   * docs/http.md, "Serving threads"; TLS ends in the threads). Needs `origin` and a named port.
   */
  public?: boolean;
}

/** `method` is lowercase and one of METHODS, "head" or "other"; a request the client left is status 499. */
export type RequestObserver = (group: string, method: string, status: number, seconds: number) => void;

/** The status counted for a request whose client went away before the answer (nginx's convention). */
const CLIENT_LEFT = 499;
/** The group of requests no route matched (bad framing or paths, 404s, 405s). */
const UNMATCHED = 'unmatched';
/** The group of what the web UI's fallback answers. */
const FRONTEND = 'frontend';

export interface HttpServer {
  readonly port: number;
  readonly app: TemplatedApp;
  /** The loopback port serving threads relay to, when `origin` was asked for. */
  readonly originPort: number | null;
  /** Stops accepting, waits up to `graceMs` for requests in flight, then closes every connection. */
  close(graceMs?: number): Promise<void>;
}

const METHODS = new Set<string>(['get', 'put', 'post', 'patch', 'delete']);

/** Reports an answer to the observer, if any; `started` is performance.now() at the request's start. */
function observed(observe: RequestObserver | undefined, group: string, rawMethod: string, status: number, started: number): void {
  if (observe === undefined) return;
  observe(group, METHODS.has(rawMethod) || rawMethod === 'head' ? rawMethod : 'other', status, (performance.now() - started) / 1000);
}

// What runs on every request is written without closures made per call where it can be: tsx
// compiles with keepNames, which turns each named closure into a defineProperty.

let collecting: Record<string, string> = {};
const collectHeader = (k: string, v: string): void => {
  collecting[k] = collecting[k] === undefined ? v : `${collecting[k]}, ${v}`;
};

/** The request's headers, repeats joined with ", " (as node:http does). */
function readHeaders(req: HttpRequest): Record<string, string> {
  const headers: Record<string, string> = {};
  collecting = headers;
  req.forEach(collectHeader);
  return headers;
}

/** A lane's parameters, as uWS gives them (undecoded). */
function laneParams(req: HttpRequest, count: number): string[] {
  const params: string[] = [];
  for (let i = 0; i < count; i++) params.push(req.getParameter(i) ?? '');
  return params;
}

/** The decoded path segments after the leading slash; throws on bad percent-encoding. */
const pathParts = (url: string): string[] => {
  const parts = url.split('/');
  parts.shift();
  return url.includes('%') ? parts.map(decodeURIComponent) : parts;
};

/** The client's address, read from uWS only when a handler asks (the response outlives its awaits). */
function peerAddress(res: HttpResponse, state: ResponseState, headers: Record<string, string>, trusted: CidrSet): string {
  const peer = forwardedPeer(headers[FORWARDED_PEER_HEADER]) ?? (state.aborted ? '' : normalizeAddress(Buffer.from(res.getRemoteAddressAsText()).toString()));
  return clientAddress(peer, headers['x-forwarded-for'], trusted);
}

/** Req.signal's source: the listener runs when the client leaves, or at once when it already has. */
function watchAbort(state: ResponseState, listener: () => void): () => void {
  if (!state.aborted) return state.onAbort(listener);
  listener();
  return () => undefined;
}

/** Answers with the error's envelope (complete in memory, so written at once). */
function failNow(res: HttpResponse, state: ResponseState, e: ApiError, head: boolean, close = false): void {
  respondComplete(res, state, errorReply(e), head, close);
}

/**
 * Answers an error. With the body still coming (and a response that has one), the answer is written
 * and the body drained before the connection closes (drain.ts). Except a 408: the server gave up
 * waiting for this client's body (upload_too_slow), so it closes at once (RFC 9110 §15.5.9) rather
 * than wait, up to the idle timeout, for the bytes it just judged too slow.
 */
function refuse(res: HttpResponse, state: ResponseState, e: ApiError, head: boolean, stillComing: boolean, declared: number | null, bounds: DrainBounds, body: BodyStream | null): void {
  if (stillComing && !head && e.status !== 408) {
    refuseWhileDraining(res, state, errorReply(e), bounds, declared, () => body?.stopReading());
  } else failNow(res, state, e, head, stillComing || e.status === 408);
}

export function startHttpServer<P>(opts: HttpServerOptions<P>): Promise<HttpServer> {
  const app = uWS.App();
  setAlwaysHeaders(opts.alwaysHeaders ?? {});
  const trusted = new CidrSet(opts.trustedProxies);
  const inFlight = new Set<Promise<void>>();
  const log = opts.log;
  const drain = opts.drain ?? DEFAULT_DRAIN;
  const observe = opts.observe;
  let sequence = 0;

  opts.websockets?.(app);
  for (const { pattern, params, lane, group } of opts.routes.lanes) {
    app.get(pattern, (res: HttpResponse, req: HttpRequest) => {
      const started = observe === undefined ? 0 : performance.now();
      let reply: Reply | undefined;
      // A GET that frames a body is not a lane's: the routes check its framing (framing.ts).
      if (req.getHeader('content-length') !== '' || req.getHeader('transfer-encoding') !== '') {
        req.setYield(true);
        return;
      }
      try {
        reply = lane(laneParams(req, params), (name) => req.getHeader(name));
      } catch (e) {
        log.error({ err: e, url: req.getUrl() }, 'a lane failed; the routes answer instead');
      }
      // Not answered here: uWS goes on to the next matching handler, the catch-all below.
      if (reply === undefined || !respondInCallback(res, reply)) req.setYield(true);
      else observed(observe, group, 'get', reply.status, started);
    });
  }

  app.any('/*', (res: HttpResponse, req: HttpRequest) => {
    // Everything needed from `req` is read here: it is invalid after the first await.
    const started = observe === undefined ? 0 : performance.now();
    const rawMethod = req.getMethod();
    const url = req.getUrl();
    const queryText = req.getQuery();
    const headers = readHeaders(req);
    const state = new ResponseState();
    let body: BodyStream | null = null;
    const sequenceNumber = ++sequence;
    const head = rawMethod === 'head';
    const method = (head ? 'get' : rawMethod) as Method;
    // uWS does not count a HEAD answer (endWithoutBody) as a response: without an abort handler it
    // aborts the process when the callback returns, even after an error answered at once.
    if (head) res.onAborted(() => state.abort());

    // Framing first: when where the body ends is in doubt, so is where the next request starts.
    const framing = requestFraming(headers['content-length'], headers['transfer-encoding']);
    if (!framing.ok) {
      failNow(res, state, new ApiError('invalid_framing', framing.problem), head, true);
      observed(observe, UNMATCHED, rawMethod, 400, started);
      return;
    }

    let parts: string[];
    try {
      parts = pathParts(url);
    } catch {
      failNow(res, state, new ApiError('invalid_path', `path is not valid percent-encoding: ${url.slice(0, 200)}`), head);
      observed(observe, UNMATCHED, rawMethod, 400, started);
      return;
    }
    if (!METHODS.has(method)) {
      failNow(res, state, new ApiError('method_not_allowed', `method ${rawMethod.toUpperCase()} is not supported`), head);
      observed(observe, UNMATCHED, rawMethod, 405, started);
      return;
    }
    const match = opts.routes.match(method, parts);
    if (!match) {
      const fallback = method === 'get' ? opts.routes.fallback?.(parts, (name) => headers[name]) : undefined;
      if (fallback) {
        respondComplete(res, state, fallback, head, false, true);
        observed(observe, FRONTEND, rawMethod, fallback.status, started);
        return;
      }
      failNow(res, state, new ApiError('not_found', `no route for ${rawMethod.toUpperCase()} ${url}`), head);
      observed(observe, UNMATCHED, rawMethod, 404, started);
      return;
    }
    if ('allowed' in match) {
      const allow = match.allowed.map((m) => m.toUpperCase()).join(', ');
      void respond(res, state, errorReply(new ApiError('method_not_allowed', `${rawMethod.toUpperCase()} is not allowed on ${url}; allowed: ${allow}`, { headers: { Allow: allow } })), head);
      observed(observe, UNMATCHED, rawMethod, 405, started);
      return;
    }
    const { route, params } = match;

    // A route without credentials or a body runs at once: a handler that answers from memory
    // (a cached narinfo, a known miss) is written before this callback returns, with no promise
    // and no onAborted. It is most of a busy binary cache's traffic.
    let early: unknown;
    let request: Req<P> | undefined;
    const quick = route.options.auth === 'none' && route.options.body === 'none';
    if (quick) {
      request = new Req<P>(sequenceNumber, method, url, queryText, headers, () => peerAddress(res, state, headers, trusted), params, null, null, head, (l) => watchAbort(state, l));
      request.principal = opts.anonymous;
      try {
        early = route.handler(request);
      } catch (e) {
        early = Promise.reject(e);
      }
      // Anything but a promise or a streamed reply is written now; a reply that cannot be written
      // (say, a value JSON cannot hold) goes the promise's way below and becomes a 500.
      if (!(early instanceof Promise)) {
        try {
          const reply = isReply(early) ? early : jsonReply(200, early ?? null);
          if (respondComplete(res, state, reply, head, false, true)) {
            observed(observe, route.group, rawMethod, reply.status, started);
            return;
          }
        } catch (e) {
          early = Promise.reject(e);
        }
      }
    }

    res.onAborted(() => {
      state.abort();
      body?.abort();
    });
    const limit = route.options.maxBody ?? opts.maxRequestSize;
    const declared = framing.length;
    let buffered: Promise<Buffer> | null = null;
    /** whether the client sent all of a buffered body (read or not) */
    let bufferedEnd: BodyEnd | null = null;
    if (route.options.body === 'buffer') {
      bufferedEnd = new BodyEnd();
      buffered = bufferBody(res, limit, declared, bufferedEnd);
      buffered.catch(() => undefined); // observed by the handler or by the 413 below
    } else if (route.options.body === 'stream') {
      if (declared !== null && declared > limit) {
        const e = new ApiError('body_too_large', `request body of ${declared} bytes exceeds the limit of ${limit} bytes${route.options.maxBodyName ? ` (${route.options.maxBodyName})` : ''}`);
        refuse(res, state, e, head, true, declared, drain, null);
        observed(observe, route.group, rawMethod, e.status, started);
        return;
      }
      body = new BodyStream(res, limit, route.options.reuseBodyPieces === true, undefined, opts.minimumBodyRate ?? null);
    }
    request ??= new Req<P>(sequenceNumber, method, url, queryText, headers, () => peerAddress(res, state, headers, trusted), params, buffered, body, head, (l) => watchAbort(state, l));

    const work = (async () => {
      try {
        let result: unknown;
        if (quick) result = await early;
        else {
          if (buffered) await buffered; // 413 before authentication or any work
          request.principal = await opts.authenticate(request, route.options.auth);
          result = await route.handler(request);
        }
        const reply = isReply(result) ? result : jsonReply(200, result ?? null);
        if (!state.aborted) body?.release();
        await respond(res, state, reply, head);
        observed(observe, route.group, rawMethod, state.aborted ? CLIENT_LEFT : reply.status, started);
      } catch (e) {
        if (state.aborted) {
          // The client left (say, mid-upload): nothing failed on this side, and nobody is there to answer.
          log.info({ request: request.id, method: rawMethod, url, reason: e instanceof Error ? e.message : String(e) }, 'client went away before the answer');
          observed(observe, route.group, rawMethod, CLIENT_LEFT, started);
          return;
        }
        // A body nobody will read, still coming: the answer must drain it.
        const stillComing = bufferedEnd !== null ? !bufferedEnd.ended : body !== null && !body.ended;
        if (isApiError(e)) {
          refuse(res, state, e, head, stillComing, declared, drain, body);
          observed(observe, route.group, rawMethod, e.status, started);
          return;
        }
        log.error({ err: e, request: request.id, method: rawMethod, url }, 'request failed');
        opts.onUnexpectedError?.(e, { request: request.id, method: rawMethod, route: route.pattern });
        refuse(res, state, new ApiError('internal', `internal error (request ${request.id})`), head, stillComing, declared, drain, body);
        observed(observe, route.group, rawMethod, 500, started);
      }
    })().finally(() => inFlight.delete(work));
    inFlight.add(work);
  });

  const listen = (address: string, port: number) => new Promise<us_listen_socket>((resolve, reject) => {
    app.listen(address, port, (socket: us_listen_socket | false) => {
      if (socket) resolve(socket);
      else reject(new Error(`cannot listen on ${address}:${port} (address in use or not available)`));
    });
  });
  return (async () => {
    const socket = opts.public === false ? null : await listen(opts.listenAddr, opts.port);
    const port = socket === null ? opts.port : uWS.us_socket_local_port(socket as unknown as uWS.us_socket);
    let origin: us_listen_socket | null = null;
    try {
      origin = opts.origin === true || socket === null ? await listen('127.0.0.1', 0) : null;
    } catch (e) {
      if (socket !== null) uWS.us_listen_socket_close(socket);
      throw e;
    }
    const originPort = origin === null ? null : uWS.us_socket_local_port(origin as unknown as uWS.us_socket);
    log.info({ address: opts.listenAddr, port, ...(socket === null ? { public: 'serving threads only' } : {}), ...(originPort === null ? {} : { originPort }) }, 'listening');
    for (const notice of opts.routes.notices) log.warn(notice);
    return {
      port,
      originPort,
      app,
      async close(graceMs = 10_000) {
        if (socket !== null) uWS.us_listen_socket_close(socket);
        if (origin !== null) uWS.us_listen_socket_close(origin);
        const deadline = new Promise((r) => setTimeout(r, graceMs).unref());
        await Promise.race([Promise.allSettled([...inFlight]), deadline]);
        app.close();
      },
    };
  })();
}
