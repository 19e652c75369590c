import uWS from 'uWebSockets.js';
import type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import type { Logger } from 'pino';
import { ApiError, isApiError } from '../protocol/index.js';
import { BodyStream, bufferBody } from './body.js';
import { CidrSet, clientAddress, normalizeAddress } from './clientAddress.js';
import { errorReply, isReply, jsonReply } from './reply.js';
import { Req } from './request.js';
import { ResponseState, respond } from './respond.js';
import type { AuthMode, Method, RouteTable } from './router.js';

export interface HttpServerOptions<P> {
  listenAddr: string;
  port: number;
  maxRequestSize: number;
  trustedProxies: readonly string[];
  log: Logger;
  routes: RouteTable<P>;
  /** Resolves the principal for a request, or throws ApiError(401/403). */
  authenticate(req: Req<P>, mode: AuthMode): Promise<P>;
  /** Registers WebSocket routes (uWS matches them before the catch-all). */
  websockets?(app: TemplatedApp): void;
}

export interface HttpServer {
  readonly port: number;
  readonly app: TemplatedApp;
  /** Stops accepting, waits up to `graceMs` for requests in flight, then closes every connection. */
  close(graceMs?: number): Promise<void>;
}

const METHODS = new Set<string>(['get', 'put', 'post', 'patch', 'delete']);

export function startHttpServer<P>(opts: HttpServerOptions<P>): Promise<HttpServer> {
  const app = uWS.App();
  const trusted = new CidrSet(opts.trustedProxies);
  const inFlight = new Set<Promise<void>>();
  const log = opts.log;
  let sequence = 0;
  const idPrefix = process.pid.toString(36);

  opts.websockets?.(app);

  app.any('/*', (res: HttpResponse, req: HttpRequest) => {
    // Everything needed from `req` is read here: it is invalid after the first await.
    const rawMethod = req.getMethod();
    const url = req.getUrl();
    const queryText = req.getQuery();
    const headers: Record<string, string> = {};
    req.forEach((k, v) => {
      headers[k] = headers[k] === undefined ? v : `${headers[k]}, ${v}`;
    });
    const state = new ResponseState();
    let body: BodyStream | null = null;
    res.onAborted(() => {
      state.abort();
      body?.abort();
    });
    const id = `${idPrefix}-${(++sequence).toString(36)}`;
    const head = rawMethod === 'head';
    const method = (head ? 'get' : rawMethod) as Method;

    const fail = (e: ApiError, close = false) =>
      respond(res, state, errorReply(e.status, e.code, e.message), head, close);

    let parts: string[];
    try {
      parts = url.split('/').slice(1).map(decodeURIComponent);
    } catch {
      void fail(new ApiError(400, 'invalid_path', `path is not valid percent-encoding: ${url.slice(0, 200)}`));
      return;
    }
    if (!METHODS.has(method)) {
      void fail(new ApiError(405, 'method_not_allowed', `method ${rawMethod.toUpperCase()} is not supported`));
      return;
    }
    const match = opts.routes.match(method, parts);
    if (!match) {
      void fail(new ApiError(404, 'not_found', `no route for ${rawMethod.toUpperCase()} ${url}`));
      return;
    }
    if ('allowed' in match) {
      const allow = match.allowed.map((m) => m.toUpperCase()).join(', ');
      void respond(res, state, errorReply(405, 'method_not_allowed', `${rawMethod.toUpperCase()} is not allowed on ${url}; allowed: ${allow}`, { Allow: allow }), head);
      return;
    }
    const { route, params } = match;
    const limit = route.options.maxBody ?? opts.maxRequestSize;
    const declared = headers['content-length'] === undefined ? null : Number(headers['content-length']);
    let buffered: Promise<Buffer> | null = null;
    if (route.options.body === 'buffer') {
      buffered = bufferBody(res, limit, declared);
      buffered.catch(() => undefined); // observed by the handler or by the 413 below
    } else if (route.options.body === 'stream') {
      if (declared !== null && declared > limit) {
        void fail(new ApiError(413, 'body_too_large', `request body of ${declared} bytes exceeds the limit of ${limit} bytes${route.options.maxBodyName ? ` (${route.options.maxBodyName})` : ''}`), true);
        return;
      }
      body = new BodyStream(res, limit);
    }
    // Read from uWS only when a handler asks (the response object outlives the handler's awaits).
    const address = (): string => {
      const peer = state.aborted ? '' : normalizeAddress(Buffer.from(res.getRemoteAddressAsText()).toString());
      return clientAddress(peer, headers['x-forwarded-for'], trusted);
    };
    const request = new Req<P>(id, method, url, new URLSearchParams(queryText), headers, address, params, buffered, body, head);

    const work = (async () => {
      try {
        if (buffered) await buffered; // 413 before authentication or any work
        request.principal = await opts.authenticate(request, route.options.auth);
        const result = await route.handler(request);
        await respond(res, state, isReply(result) ? result : jsonReply(200, result ?? null), head);
      } catch (e) {
        if (isApiError(e)) {
          // A body we stopped reading cannot be left on a keep-alive connection.
          const close = e.status === 413 || (body !== null && !state.aborted && e.status >= 400);
          await fail(e, close);
          return;
        }
        log.error({ err: e, request: id, method: rawMethod, url }, 'request failed');
        await fail(new ApiError(500, 'internal', `internal error (request ${id})`), body !== null);
      }
    })().finally(() => inFlight.delete(work));
    inFlight.add(work);
  });

  return new Promise((resolve, reject) => {
    app.listen(opts.listenAddr, opts.port, (socket: us_listen_socket | false) => {
      if (!socket) {
        reject(new Error(`cannot listen on ${opts.listenAddr}:${opts.port} (address in use or not available)`));
        return;
      }
      const port = uWS.us_socket_local_port(socket as unknown as uWS.us_socket);
      log.info({ address: opts.listenAddr, port }, 'listening');
      resolve({
        port,
        app,
        async close(graceMs = 10_000) {
          uWS.us_listen_socket_close(socket);
          const deadline = new Promise((r) => setTimeout(r, graceMs).unref());
          await Promise.race([Promise.allSettled([...inFlight]), deadline]);
          app.close();
        },
      });
    });
  });
}
