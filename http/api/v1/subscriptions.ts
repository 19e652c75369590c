// Subscriptions of projects and organizations to caches, and the cache side's requests.
import { ProjectRef, ResourceName, SubscribeBody } from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import type { Req } from '../../request.js';
import type { Router } from '../../router.js';

export function subscriptionsRoutes(r: Router<Principal>, { access: { subscriptions } }: Pick<Services, 'access'>): void {
  const project = (req: Req<Principal>) => req.param('project', ProjectRef);
  const org = (req: Req<Principal>) => req.param('org', ResourceName);
  const cache = (req: Req<Principal>) => req.param('cache', ResourceName);
  r.get('/projects/:project/subscribe', (req) => subscriptions.listProject(req.principal, project(req)));
  r.post('/projects/:project/subscribe/:cache', async (req) =>
    subscriptions.subscribeProject(req.principal, project(req), cache(req), (await req.body(SubscribeBody)).mode));
  r.del('/projects/:project/subscribe/:cache', (req) => subscriptions.unsubscribeProject(req.principal, project(req), cache(req)));

  r.get('/orgs/:org/subscribe', (req) => subscriptions.listOrganization(req.principal, org(req)));
  r.post('/orgs/:org/subscribe/:cache', async (req) =>
    subscriptions.subscribeOrganization(req.principal, org(req), cache(req), (await req.body(SubscribeBody)).mode));
  r.del('/orgs/:org/subscribe/:cache', (req) => subscriptions.unsubscribeOrganization(req.principal, org(req), cache(req)));

  r.get('/caches/:cache/subscriptions', (req) => subscriptions.listSubscribers(req.principal, cache(req)));
  r.get('/caches/:cache/subscription-requests', (req) => subscriptions.listRequests(req.principal, cache(req)));
  r.post('/caches/:cache/subscription-requests/:id/approve', (req) => subscriptions.approve(req.principal, cache(req), req.param<string>('id')));
  r.del('/caches/:cache/subscription-requests/:id', (req) => subscriptions.deny(req.principal, cache(req), req.param<string>('id')));
}
