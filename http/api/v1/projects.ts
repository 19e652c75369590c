// /projects/{org}… (two segments). The single-segment routes (/projects/{project}/users,
// …/subscribe, …/workers) are registered before these in routes.ts; the reserved project names
// keep the two shapes apart.
import { CreateProjectBody, ProjectName, ResourceName, UpdateProjectBody } from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import type { Req } from '../../request.js';
import type { Router } from '../../router.js';

export function projectsRoutes(r: Router<Principal>, { access: { projects } }: Pick<Services, 'access'>): void {
  const org = (req: Req<Principal>) => req.param('org', ResourceName);
  const project = (req: Req<Principal>) => req.param('project', ProjectName);
  r.get('/projects/:org', (req) => projects.list(req.principal, org(req)));
  r.put('/projects/:org', async (req) => projects.create(req.principal, org(req), await req.body(CreateProjectBody)));
  r.get('/projects/:org/:project', (req) => projects.get(req.principal, org(req), project(req)));
  r.patch('/projects/:org/:project', async (req) => projects.update(req.principal, org(req), project(req), await req.body(UpdateProjectBody)));
  r.del('/projects/:org/:project', (req) => projects.remove(req.principal, org(req), project(req)));
  r.get('/projects/:org/:project/details', (req) => projects.details(req.principal, org(req), project(req)));
  r.post('/projects/:org/:project/active', (req) => projects.setActive(req.principal, org(req), project(req), true));
  r.del('/projects/:org/:project/active', (req) => projects.setActive(req.principal, org(req), project(req), false));
  r.post('/projects/:org/:project/check-repository', (req) => projects.checkRepository(req.principal, org(req), project(req)));
}
