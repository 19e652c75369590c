// GET /api/v1/openapi.json: the OpenAPI 3.1 description of every route of the table, built once on
// first request from the table itself and the schemas of http/openApiRoutes.ts.
import { openApiDocument, type OpenApiRoute } from '../../../protocol/index.js';
import type { Services } from '../../../services/index.js';
import { pathParameters, routeSchemas } from '../../openApiRoutes.js';
import { bytesReply } from '../../reply.js';
import type { RouteTable, Router } from '../../router.js';

/** The table's routes as the document describes them; a route missing from routeSchemas gets none (the test finds it). */
export function describedRoutes<P>(table: RouteTable<P>): OpenApiRoute[] {
  return table.list().map((route) => ({
    method: route.method,
    pattern: route.pattern,
    auth: route.options.auth,
    body: route.options.body,
    schemas: routeSchemas[`${route.method} ${route.pattern}`] ?? {},
    params: pathParameters,
  }));
}

export function openApiRoutes<P>(r: Router<P>, table: RouteTable<P>, { config, version }: Pick<Services, 'config' | 'version'>): void {
  let body: string | undefined;
  r.get(
    '/openapi.json',
    () => {
      body ??= JSON.stringify(openApiDocument(describedRoutes(table), { version, serverUrl: config['serveUrl'] }));
      return bytesReply(200, body, { 'content-type': 'application/json' });
    },
    { auth: 'none' },
  );
}
