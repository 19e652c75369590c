import { BuildId } from '../../../protocol/index.js';
import type { BuildViewsService, Principal } from '../../../services/index.js';
import { bytesReply } from '../../reply.js';
import type { Req } from '../../request.js';
import type { Router } from '../../router.js';

// One build: its record, its stored log (text/plain) and its direct dependencies.
export function buildsRoutes(r: Router<Principal>, views: BuildViewsService): void {
  const id = (req: Req<Principal>) => req.param('id', BuildId);
  r.get('/builds/:id', (req) => views.build(req.principal, id(req)));
  r.get('/builds/:id/log', async (req) => bytesReply(200, await views.log(req.principal, id(req)), { 'content-type': 'text/plain; charset=utf-8' }));
  r.get('/builds/:id/dependencies', (req) => views.dependencies(req.principal, id(req)));
}
