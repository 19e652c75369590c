// /api/v1/builds routes.
import { z } from 'zod';
import { BuildActionBody, BuildId, EvaluationId } from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import { contentTypeOf } from '../../cache/contentType.js';
import { bytesReply, chunkedReply, streamReply } from '../../reply.js';
import type { Req } from '../../request.js';
import type { Router } from '../../router.js';

const ProductFilename = z.string().min(1, 'must not be empty').max(255, 'must be at most 255 characters');

// One build: its record, abort or restart of it, its stored log (text/plain) and its direct dependencies; with the build
// data services, the streamed logs, the dependency graph and the build products (docs/builds.md).
export function buildsRoutes(r: Router<Principal>, { builds: { views, data, control } }: Pick<Services, 'builds'>): void {
  const id = (req: Req<Principal>) => req.param('id', BuildId);
  r.get('/builds/:id', (req) => views.build(req.principal, id(req)));
  r.post('/builds/:id', async (req) => {
    const build = id(req);
    return control.act(req.principal, build, (await req.body(BuildActionBody)).method);
  });
  r.get('/builds/:id/log', async (req) => bytesReply(200, await views.log(req.principal, id(req)), { 'content-type': 'text/plain; charset=utf-8', 'x-content-type-options': 'nosniff' }));
  r.get('/builds/:id/dependencies', (req) => views.dependencies(req.principal, id(req)));
  if (!data) return;
  r.post('/builds/:id/log', async (req) => chunkedReply(200, await data.logStreams.live(req.principal, id(req)), {
    'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff',
  }));
  r.post('/evals/:id/builds', async (req) => chunkedReply(200, await data.logStreams.evaluation(req.principal, req.param('id', EvaluationId)), {
    'content-type': 'application/x-ndjson', 'cache-control': 'no-store',
  }));
  r.get('/builds/:id/graph', (req) => data.graphs.graph(req.principal, id(req)));
  r.get('/builds/:id/downloads', (req) => data.products.list(req.principal, id(req)));
  r.get('/builds/:id/download/:filename', async (req) => {
    const { product, body } = await data.products.open(req.principal, id(req), req.param('filename', ProductFilename));
    return streamReply(200, product.size, body, {
      'content-type': contentTypeOf(product.filename),
      'content-disposition': `attachment; filename="${product.filename.replace(/[^A-Za-z0-9._+-]/g, '_')}"`,
      'x-content-type-options': 'nosniff',
    });
  });
}
