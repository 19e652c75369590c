// The OpenAPI 3.1 description of kiln's HTTP API (spec versioning rule 3), generated from the route
// table and the zod schemas the routes validate with; nothing in it is written by hand. Pure: the
// caller (http/openApiRoutes.ts) hands in the routes and what each one reads and answers.
import { z } from 'zod';
import { errorCodes, type ErrorCode } from './errorCodes.js';

type Method = 'get' | 'put' | 'post' | 'patch' | 'delete';

/** What a route reads and answers beyond what its registration says. */
export interface RouteSchemas {
  /** one line for the operation's summary */
  summary?: string;
  /** the JSON body the handler validates with req.body() */
  body?: z.ZodType;
  /** a body that is not JSON: its media type (a NAR stream, a tarball, multipart) */
  rawBody?: string;
  /** the query schema the handler validates with req.query() */
  query?: z.ZodType;
  /** the envelope's `message` on success; any JSON when absent */
  response?: z.ZodType;
  /** a success that is not the JSON envelope: its media type (narinfo text, a NAR, a log) */
  rawResponse?: string;
  /** a success without a body (an empty 200, a 204, a redirect): its status is `status` */
  emptyResponse?: true;
  /** the status of a success when it is not 200 */
  status?: number;
  /** codes this route answers besides those its registration implies (auth, body, query, parameters) */
  errors?: readonly ErrorCode[];
  /** how this route authenticates when it is not the route's auth mode (binary cache Basic, the metrics token, a Git host's signature) */
  security?: 'cache' | 'metricsToken' | 'hookSignature' | 'scimToken';
  /** a WebSocket upgrade (documented as the GET that opens it) */
  socket?: true;
}

export interface OpenApiRoute {
  method: Method;
  /** kiln's pattern syntax: `/caches/:cache`, `/:hash.narinfo`, `/*path` */
  pattern: string;
  auth: 'none' | 'optional' | 'required';
  body: 'none' | 'buffer' | 'stream';
  schemas: RouteSchemas;
  /** path parameter schemas by name (`cache` → CacheName); a string when absent */
  params: Readonly<Record<string, z.ZodType>>;
}

type JsonSchema = Record<string, unknown>;

/** `{error: true, message, code}` with the codes a status can carry for this route */
const errorEnvelope = (codes: readonly string[]): JsonSchema => ({
  type: 'object',
  required: ['error', 'message', 'code'],
  properties: { error: { const: true }, message: { type: 'string' }, code: { enum: [...codes] } },
});

/**
 * A zod schema as JSON Schema 2020-12. transforms and defaults describe what a client sends (io:
 * input); a refine has no JSON Schema form and is left out. A recursive schema (the JSON value of a
 * GC run's result) comes out with its own `$defs`, whose `#/$defs/…` references would mean the
 * document's root and which generated clients cannot type: its recursive part is any JSON there.
 */
function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  const { $schema: _dialect, $defs, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any', target: 'draft-2020-12' }) as JsonSchema;
  if (!$defs) return rest;
  const unlink = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(unlink);
    if (typeof value !== 'object' || value === null) return value;
    if (typeof (value as JsonSchema)['$ref'] === 'string') return {};
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, unlink(v)]));
  };
  return unlink(rest) as JsonSchema;
}

/** `/caches/:cache/:hash.narinfo` → `/caches/{cache}/{hash}.narinfo`, with the parameter names in order */
export function openApiPath(pattern: string): { path: string; names: string[] } {
  const names: string[] = [];
  const path = pattern
    .split('/')
    .map((segment) => {
      const m = /^[:*]([a-zA-Z][a-zA-Z0-9]*)(.*)$/.exec(segment);
      if (!m) return segment;
      names.push(m[1]!);
      return `{${m[1]}}${m[2]}`;
    })
    .join('/');
  return { path, names };
}

/** The error codes a route can answer: those its registration implies, then its own. */
function routeErrorCodes(route: OpenApiRoute, paramNames: readonly string[]): ErrorCode[] {
  const codes = new Set<ErrorCode>(['internal', 'rate_limited']);
  if (route.method !== 'get' && route.body !== 'none') codes.add('invalid_framing');
  if (route.auth === 'required') for (const c of ['unauthorized', 'invalid_token', 'token_expired', 'forbidden', 'account_disabled', 'forbidden_source_ip'] as const) codes.add(c);
  if (route.auth === 'optional') for (const c of ['invalid_token', 'token_expired'] as const) codes.add(c);
  if (route.schemas.body) for (const c of ['invalid_json', 'invalid_body', 'body_too_large'] as const) codes.add(c);
  if (route.schemas.rawBody) codes.add('body_too_large');
  if (route.schemas.query) codes.add('invalid_query');
  if (paramNames.length > 0) {
    codes.add('invalid_parameter');
    codes.add('not_found');
  }
  if (route.schemas.socket) codes.add('websocket_required');
  for (const c of route.schemas.errors ?? []) codes.add(c);
  return [...codes];
}

const securityOf = (route: OpenApiRoute): Record<string, string[]>[] => {
  switch (route.schemas.security) {
    case 'cache':
      return [{}, { cacheBasic: [] }, { bearer: [] }];
    case 'metricsToken':
      return [{ metricsToken: [] }];
    case 'scimToken':
      return [{ scimToken: [] }];
    case 'hookSignature':
      return [{}];
    case undefined:
      if (route.auth === 'required') return [{ bearer: [] }];
      if (route.auth === 'optional') return [{}, { bearer: [] }];
      return [{}];
  }
};

const operationId = (method: Method, path: string): string =>
  method +
  path
    .split(/[^a-zA-Z0-9]+/)
    .filter(Boolean)
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join('');

/** What a route answers when it succeeds: the envelope with its typed message, or what it answers instead. */
function successResponse(s: RouteSchemas, okStatus: string): JsonSchema {
  if (s.socket) return { description: 'the WebSocket opens' };
  if (s.emptyResponse) return { description: okStatus.startsWith('3') ? 'a redirect: see its Location' : 'success, without a body' };
  if (s.rawResponse) return { description: 'success', content: { [s.rawResponse]: { schema: {} } } };
  return {
    description: 'success: the envelope with the result as `message`',
    content: {
      'application/json': {
        schema: {
          type: 'object',
          required: ['error', 'message'],
          properties: { error: { const: false }, message: s.response ? jsonSchema(s.response, 'output') : {} },
        },
      },
    },
  };
}

function operation(route: OpenApiRoute): { path: string; op: JsonSchema } {
  const { path, names } = openApiPath(route.pattern);
  const s = route.schemas;
  const parameters: JsonSchema[] = names.map((name) => ({
    name,
    in: 'path',
    required: true,
    schema: route.params[name] ? jsonSchema(route.params[name], 'input') : { type: 'string' },
  }));
  if (s.query) {
    const query = jsonSchema(s.query, 'input') as { properties?: Record<string, JsonSchema>; required?: string[] };
    for (const [name, schema] of Object.entries(query.properties ?? {})) {
      parameters.push({ name, in: 'query', required: query.required?.includes(name) ?? false, schema });
    }
  }
  const responses: Record<string, JsonSchema> = {};
  const okStatus = String(s.socket ? 101 : (s.status ?? 200));
  responses[okStatus] = successResponse(s, okStatus);
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of routeErrorCodes(route, names)) {
    const status = errorCodes[code].status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  for (const [status, codes] of [...byStatus].sort((a, b) => a[0] - b[0])) {
    responses[String(status)] = {
      description: codes.map((c) => `\`${c}\`: ${errorCodes[c].meaning}`).join('; '),
      content: { 'application/json': { schema: errorEnvelope(codes) } },
    };
  }
  const op: JsonSchema = {
    operationId: operationId(route.method, path),
    summary: s.summary ?? `${route.method.toUpperCase()} ${path}`,
    tags: [tagOf(path)],
    security: securityOf(route),
    parameters,
    responses,
  };
  if (s.body) op['requestBody'] = { required: true, content: { 'application/json': { schema: jsonSchema(s.body, 'input') } } };
  else if (s.rawBody) op['requestBody'] = { required: true, content: { [s.rawBody]: { schema: {} } } };
  return { path, op };
}

/** `/api/v1/caches/{cache}` → `caches`; `/cache/{cache}/…` → `binary cache` */
const tagOf = (path: string): string => {
  const parts = path.split('/').filter(Boolean);
  if (parts[0] === 'api' && parts[1] === 'v1') return parts[2] ?? 'api';
  return parts[0] === 'cache' ? 'binary cache' : (parts[0] ?? '');
};

/** The whole document for these routes. */
export function openApiDocument(routes: readonly OpenApiRoute[], info: { version: string; serverUrl: string }): JsonSchema {
  const paths: Record<string, Record<string, JsonSchema>> = {};
  for (const route of routes) {
    const { path, op } = operation(route);
    (paths[path] ??= {})[route.method] = op;
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'kiln',
      version: info.version,
      description: 'Nix CI server and multi-tenant Nix binary cache. Every JSON answer is an envelope: `{error: false, message}` on success, `{error: true, message, code}` on a refusal (docs/errors.md lists the codes).',
    },
    servers: [{ url: info.serverUrl }],
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'a session token (POST /api/v1/auth/basic/login) or an API key (`SVC…`, POST /api/v1/user/keys)' },
        cacheBasic: { type: 'http', scheme: 'basic', description: 'the binary cache: any user name, a session token or API key as the password (what Nix\'s netrc takes)' },
        metricsToken: { type: 'http', scheme: 'bearer', description: 'the token of metrics.tokenFile (the Prometheus scrape)' },
        scimToken: { type: 'http', scheme: 'bearer', description: 'the token of scim.tokenFile' },
      },
    },
    paths,
  };
}
