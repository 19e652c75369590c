// kiln routes itself (one uWS catch-all) so that a path with the wrong method is a 405 that
// lists the allowed ones, not a 404, and so route files never see uWS.
import type { Reply } from './reply.js';
import type { Req } from './request.js';

export type Method = 'get' | 'put' | 'post' | 'patch' | 'delete';
/** none: anyone; optional: a principal if credentials came; required: 401 without them. */
export type AuthMode = 'none' | 'optional' | 'required';
/** buffer: the whole body up to a limit; stream: an async iterable with backpressure. */
export type BodyMode = 'none' | 'buffer' | 'stream';

export type Handler<P> = (req: Req<P>) => unknown;

export interface RouteOptions {
  auth: AuthMode;
  body: BodyMode;
  /** Bytes allowed in the body; http.maxRequestSize when unset. */
  maxBody?: number;
  /** The option that sets maxBody, named in the 413 (e.g. http.maxSourceUploadSize). */
  maxBodyName?: string;
  /** body 'stream': pieces are reused memory, each valid until the next is asked for (BodyStream.reusesPieces) */
  reuseBodyPieces?: boolean;
}

/**
 * A GET answered from memory before kiln's own routing, by uWS's router in C++ (server.ts): it gets
 * the pattern's parameters undecoded and a header reader, valid only during the call, and answers
 * with a reply complete in memory, or undefined to hand the request on to the routes, which then
 * answer it as if the lane did not exist. For the few requests that are most of the traffic (a
 * cached narinfo), where the general path's header copy, route search and request object cost
 * more than the answer.
 */
export type Lane = (params: readonly string[], header: (name: string) => string) => Reply | undefined;

export interface LaneRoute {
  /** uWS syntax (`/cache/:cache/:file`): whole segments only */
  pattern: string;
  /** the route group its answers are counted under (routeGroup) */
  group: string;
  /** the pattern's parameter count */
  params: number;
  lane: Lane;
}

export interface Route<P> {
  method: Method;
  pattern: string;
  /** the route group its answers are counted under (routeGroup) */
  group: string;
  segments: Segment[];
  handler: Handler<P>;
  options: RouteOptions;
}

type Segment =
  | { kind: 'literal'; text: string }
  | { kind: 'param'; name: string; suffix: string }
  | { kind: 'rest'; name: string };

/**
 * The label a route's requests are counted under in kiln_http_request_duration_seconds: `cache` for
 * the binary cache, `api/<resource>` for the API (its first segment after /api/v1), else the first
 * segment. A bounded set, fixed by the route table, whatever paths clients ask for.
 */
export function routeGroup(pattern: string): string {
  const parts = pattern.split('/');
  if (parts[1] === 'api' && parts[2] === 'v1') return `api/${parts[3]?.startsWith(':') ? 'param' : (parts[3] ?? '')}`;
  return parts[1] ?? '';
}

function compile(pattern: string): Segment[] {
  return pattern
    .split('/')
    .slice(1)
    .map((s): Segment => {
      if (s.startsWith('*')) return { kind: 'rest', name: s.slice(1) };
      if (!s.startsWith(':')) return { kind: 'literal', text: s };
      const dot = s.indexOf('.');
      return dot < 0 ? { kind: 'param', name: s.slice(1), suffix: '' } : { kind: 'param', name: s.slice(1, dot), suffix: s.slice(dot) };
    });
}

function matchSegments(segments: Segment[], parts: string[]): Record<string, string> | null {
  if (segments.length !== parts.length && segments[segments.length - 1]?.kind !== 'rest') return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i]!;
    if (seg.kind === 'rest') {
      params[seg.name] = parts.slice(i).join('/');
      return params;
    }
    const part = parts[i];
    if (part === undefined) return null;
    if (seg.kind === 'literal') {
      if (part !== seg.text) return null;
      continue;
    }
    if (!part.endsWith(seg.suffix) || part.length === seg.suffix.length) return null;
    params[seg.name] = part.slice(0, part.length - seg.suffix.length);
  }
  return segments.length === parts.length ? params : null;
}

/**
 * Answers a GET or HEAD that no route matched, from the decoded path segments and a header reader,
 * or undefined for the usual 404 (the web UI's files and index.html: http/frontend/).
 */
export type Fallback = (parts: readonly string[], header: (name: string) => string | undefined) => Reply | undefined;

export type Match<P> = { route: Route<P>; params: Record<string, string> } | { allowed: Method[] } | null;

export class RouteTable<P> {
  private readonly routes: Route<P>[] = [];
  readonly lanes: LaneRoute[] = [];
  /** what a GET no route matched gets instead of the 404, when set */
  fallback: Fallback | null = null;
  /** what the operator should hear once the server listens (say, the web UI is not built) */
  readonly notices: string[] = [];

  add(route: Route<P>): void {
    this.routes.push(route);
  }

  addLane(pattern: string, lane: Lane): void {
    if (!/^(\/(:[a-z][a-zA-Z0-9]*|[^/:*]+))+$/.test(pattern)) throw new Error(`a lane's pattern takes whole segments, literal or :name: ${pattern}`);
    this.lanes.push({ pattern, group: routeGroup(pattern), params: pattern.split('/:').length - 1, lane });
  }

  /** `parts` are the decoded path segments after the leading slash. */
  match(method: Method, parts: string[]): Match<P> {
    let allowed: Set<Method> | undefined;
    for (const route of this.routes) {
      const params = matchSegments(route.segments, parts);
      if (!params) continue;
      if (route.method === method) return { route, params };
      (allowed ??= new Set()).add(route.method);
    }
    return allowed ? { allowed: [...allowed] } : null;
  }

  /** The literal first path segments of the routes ("api", "cache", …): paths the table owns. */
  firstSegments(): Set<string> {
    const first = new Set<string>();
    for (const route of this.routes) if (route.segments[0]?.kind === 'literal') first.add(route.segments[0].text);
    return first;
  }

  list(): readonly Route<P>[] {
    return this.routes;
  }
}

/** The face route files see: register handlers under a prefix with default options. */
export class Router<P> {
  constructor(
    private readonly table: RouteTable<P>,
    private readonly prefix = '',
    private readonly defaults: RouteOptions = { auth: 'required', body: 'none' },
  ) {}

  scope(prefix: string, defaults: Partial<RouteOptions> = {}): Router<P> {
    return new Router(this.table, this.prefix + prefix, { ...this.defaults, ...defaults });
  }

  route(method: Method, pattern: string, handler: Handler<P>, options: Partial<RouteOptions> = {}): void {
    const full = this.prefix + pattern;
    const body: BodyMode = method === 'get' ? 'none' : (options.body ?? (this.defaults.body === 'none' ? 'buffer' : this.defaults.body));
    this.table.add({ method, pattern: full, group: routeGroup(full), segments: compile(full), handler, options: { ...this.defaults, ...options, body } });
  }

  /** A lane (see Lane) for GET `pattern` under this router's prefix; a route must answer the same requests too. */
  lane(pattern: string, lane: Lane): void {
    this.table.addLane(this.prefix + pattern, lane);
  }

  get(pattern: string, handler: Handler<P>, options?: Partial<RouteOptions>): void {
    this.route('get', pattern, handler, options);
  }
  put(pattern: string, handler: Handler<P>, options?: Partial<RouteOptions>): void {
    this.route('put', pattern, handler, options);
  }
  post(pattern: string, handler: Handler<P>, options?: Partial<RouteOptions>): void {
    this.route('post', pattern, handler, options);
  }
  patch(pattern: string, handler: Handler<P>, options?: Partial<RouteOptions>): void {
    this.route('patch', pattern, handler, options);
  }
  del(pattern: string, handler: Handler<P>, options?: Partial<RouteOptions>): void {
    this.route('delete', pattern, handler, options);
  }
}
