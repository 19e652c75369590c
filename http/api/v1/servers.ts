// /api/v1 routes of an organization's build servers.
import { CreateServerBody, ResourceName, UpdateServerBody } from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import type { Req } from '../../request.js';
import type { Router } from '../../router.js';

export function serversRoutes(r: Router<Principal>, { access: { servers } }: Pick<Services, 'access'>): void {
  const org = (req: Req<Principal>) => req.param('org', ResourceName);
  const server = (req: Req<Principal>) => req.param('server', ResourceName);
  r.get('/servers/:org', (req) => servers.list(req.principal, org(req)));
  r.put('/servers/:org', async (req) => servers.create(req.principal, org(req), await req.body(CreateServerBody)));
  r.get('/servers/:org/:server', (req) => servers.get(req.principal, org(req), server(req)));
  r.patch('/servers/:org/:server', async (req) => servers.update(req.principal, org(req), server(req), await req.body(UpdateServerBody)));
  r.del('/servers/:org/:server', (req) => servers.remove(req.principal, org(req), server(req)));
  r.post('/servers/:org/:server/active', (req) => servers.setActive(req.principal, org(req), server(req), true));
  r.del('/servers/:org/:server/active', (req) => servers.setActive(req.principal, org(req), server(req), false));
  r.post('/servers/:org/:server/check-connection', (req) => servers.checkConnection(req.principal, org(req), server(req)));
}
