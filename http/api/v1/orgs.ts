// /orgs…: organizations, their members (added directly; no invitations) and their SSH key.
// Organization subscriptions are in subscriptions.ts.
import {
  CreateOrganizationBody, MemberBody, RemoveMemberBody, ResourceName, UpdateOrganizationBody,
} from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import type { Req } from '../../request.js';
import type { Router } from '../../router.js';

export function orgsRoutes(r: Router<Principal>, { access: { organizations, organizationMembers, organizationSshKey } }: Pick<Services, 'access'>): void {
  const org = (req: Req<Principal>) => req.param('org', ResourceName);
  r.get('/orgs', (req) => organizations.list(req.principal));
  r.put('/orgs', async (req) => organizations.create(req.principal, await req.body(CreateOrganizationBody)));
  r.get('/orgs/:org', (req) => organizations.get(req.principal, org(req)));
  r.patch('/orgs/:org', async (req) => organizations.update(req.principal, org(req), await req.body(UpdateOrganizationBody)));
  r.del('/orgs/:org', (req) => organizations.remove(req.principal, org(req)));

  r.get('/orgs/:org/users', (req) => organizationMembers.list(req.principal, org(req)));
  r.post('/orgs/:org/users', async (req) => organizationMembers.add(req.principal, org(req), await req.body(MemberBody)));
  r.patch('/orgs/:org/users', async (req) => organizationMembers.update(req.principal, org(req), await req.body(MemberBody)));
  r.del('/orgs/:org/users', async (req) => organizationMembers.remove(req.principal, org(req), await req.body(RemoveMemberBody)));

  r.get('/orgs/:org/ssh', (req) => organizationSshKey.get(req.principal, org(req)));
  r.post('/orgs/:org/ssh', (req) => organizationSshKey.regenerate(req.principal, org(req)));
}
