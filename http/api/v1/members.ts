// Member lists of projects and caches: GET lists, PATCH changes a role, DELETE removes (body
// {user}). POST (inviting) is in invitations.ts.
import { MemberBody, ProjectRef, RemoveMemberBody, ResourceName } from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import type { Req } from '../../request.js';
import type { Router } from '../../router.js';

export function membersRoutes(r: Router<Principal>, { access: { members } }: Pick<Services, 'access'>): void {
  const project = (req: Req<Principal>) => req.param('project', ProjectRef);
  const cache = (req: Req<Principal>) => req.param('cache', ResourceName);
  r.get('/projects/:project/users', (req) => members.list(req.principal, 'project', project(req)));
  r.patch('/projects/:project/users', async (req) => members.update(req.principal, 'project', project(req), await req.body(MemberBody)));
  r.del('/projects/:project/users', async (req) => members.remove(req.principal, 'project', project(req), await req.body(RemoveMemberBody)));
  r.get('/caches/:cache/users', (req) => members.list(req.principal, 'cache', cache(req)));
  r.patch('/caches/:cache/users', async (req) => members.update(req.principal, 'cache', cache(req), await req.body(MemberBody)));
  r.del('/caches/:cache/users', async (req) => members.remove(req.principal, 'cache', cache(req), await req.body(RemoveMemberBody)));
}
