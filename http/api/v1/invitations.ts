// Invitations (docs/permissions.md, "Invitations"): invite with POST on a member list, the
// pending lists per project and cache, "My invites", and accept / decline / revoke by id.
import { InviteBody, ProjectRef, ResourceName } from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import type { Req } from '../../request.js';
import type { Router } from '../../router.js';

export function invitationsRoutes(r: Router<Principal>, { access: { invitations } }: Pick<Services, 'access'>): void {
  const project = (req: Req<Principal>) => req.param('project', ProjectRef);
  const cache = (req: Req<Principal>) => req.param('cache', ResourceName);
  const id = (req: Req<Principal>) => req.param<string>('id');
  r.post('/projects/:project/users', async (req) => invitations.inviteToProject(req.principal, project(req), await req.body(InviteBody)));
  r.get('/projects/:project/invitations', (req) => invitations.listProject(req.principal, project(req)));
  r.post('/caches/:cache/users', async (req) => invitations.inviteToCache(req.principal, cache(req), await req.body(InviteBody)));
  r.get('/caches/:cache/invitations', (req) => invitations.listCache(req.principal, cache(req)));
  r.get('/user/invitations', (req) => invitations.listMine(req.principal));
  r.post('/invitations/:id/accept', (req) => invitations.accept(req.principal, id(req)));
  r.post('/invitations/:id/decline', (req) => invitations.decline(req.principal, id(req)));
  r.del('/invitations/:id', (req) => invitations.revoke(req.principal, id(req)));
}
