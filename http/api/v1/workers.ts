// Worker peer tokens of a project: the token is in the POST answer only.
import { ProjectRef, RegisterWorkerBody } from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import type { Req } from '../../request.js';
import type { Router } from '../../router.js';

export function workersRoutes(r: Router<Principal>, { access: { workerRegistrations } }: Pick<Services, 'access'>): void {
  const project = (req: Req<Principal>) => req.param('project', ProjectRef);
  r.post('/projects/:project/workers', async (req) => workerRegistrations.register(req.principal, project(req), await req.body(RegisterWorkerBody)));
  r.get('/projects/:project/workers', (req) => workerRegistrations.list(req.principal, project(req)));
  r.del('/projects/:project/workers/:id', (req) => workerRegistrations.remove(req.principal, project(req), req.param<string>('id')));
}
