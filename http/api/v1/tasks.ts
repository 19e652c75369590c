// /tasks/{project}… with a single-segment project (UUID or a name one organization uses), as
// the spec's /tasks/{project}/{task}/evaluate.
import { CreateTaskBody, ProjectRef, ResourceName, UpdateTaskBody } from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import type { Req } from '../../request.js';
import type { Router } from '../../router.js';

export function tasksRoutes(r: Router<Principal>, { access: { tasks } }: Pick<Services, 'access'>): void {
  const project = (req: Req<Principal>) => req.param('project', ProjectRef);
  const task = (req: Req<Principal>) => req.param('task', ResourceName);
  r.get('/tasks/:project', (req) => tasks.list(req.principal, project(req)));
  r.put('/tasks/:project', async (req) => tasks.create(req.principal, project(req), await req.body(CreateTaskBody)));
  r.get('/tasks/:project/:task', (req) => tasks.get(req.principal, project(req), task(req)));
  r.patch('/tasks/:project/:task', async (req) => tasks.update(req.principal, project(req), task(req), await req.body(UpdateTaskBody)));
  r.del('/tasks/:project/:task', (req) => tasks.remove(req.principal, project(req), task(req)));
  r.post('/tasks/:project/:task/star', (req) => tasks.star(req.principal, project(req), task(req), true));
  r.del('/tasks/:project/:task/star', (req) => tasks.star(req.principal, project(req), task(req), false));
}
