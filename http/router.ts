import type { Req } from './request.js';

// kiln routes itself (one uWS catch-all) so that a path with the wrong method is a 405 that
// lists the allowed ones, not a 404, and so route files never see uWS.

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

export interface Route<P> {
  method: Method;
  pattern: string;
  segments: Segment[];
  handler: Handler<P>;
  options: RouteOptions;
}

type Segment =
  | { kind: 'literal'; text: string }
  | { kind: 'param'; name: string; suffix: string }
  | { kind: 'rest'; name: string };

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

export type Match<P> = { route: Route<P>; params: Record<string, string> } | { allowed: Method[] } | null;

export class RouteTable<P> {
  private readonly routes: Route<P>[] = [];

  add(route: Route<P>): void {
    this.routes.push(route);
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
    this.table.add({ method, pattern: full, segments: compile(full), handler, options: { ...this.defaults, ...options, body } });
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
