// Webhooks per scope (spec: Webhooks): /projects/{project}/webhooks, /caches/{cache}/webhooks and
// /admin/webhooks, each with the same sub-resources:
//   GET, PUT (or POST)              list, create (the answer carries the secret, once)
//   GET, PATCH, DELETE /{id}
//   POST /{id}/rotate-secret        a new secret, shown once
//   POST /{id}/test                 webhook.ping at once; answers the recorded delivery
//   GET /{id}/deliveries[?page=&per_page=&status=], GET /{id}/deliveries/{delivery}
//   POST /{id}/deliveries/{delivery}/redeliver   the event again, as a new delivery, at once
import { CreateWebhookBody, DeliveryListQuery, ProjectRef, ResourceName, UpdateWebhookBody } from '../../../protocol/index.js';
import type { Principal, WebhookScopeRef, Services } from '../../../services/index.js';
import type { Req } from '../../request.js';
import type { Router } from '../../router.js';

type ScopeOf = (req: Req<Principal>) => WebhookScopeRef;

const scopes: readonly { prefix: string; scope: ScopeOf }[] = [
  { prefix: '/projects/:project/webhooks', scope: (req) => ({ kind: 'project', project: req.param('project', ProjectRef) }) },
  { prefix: '/caches/:cache/webhooks', scope: (req) => ({ kind: 'cache', cache: req.param('cache', ResourceName) }) },
  { prefix: '/admin/webhooks', scope: () => ({ kind: 'instance' }) },
];

export function deliveryQuery(req: Req<Principal>): DeliveryListQuery {
  return req.query(DeliveryListQuery);
}

export function webhooksRoutes(r: Router<Principal>, { events: { webhooks } }: Pick<Services, 'events'>): void {
  for (const { prefix, scope } of scopes) {
    const id = (req: Req<Principal>) => req.param<string>('id');
    const create = async (req: Req<Principal>) => webhooks.create(req.principal, scope(req), await req.body(CreateWebhookBody));
    r.get(prefix, (req) => webhooks.list(req.principal, scope(req)));
    r.put(prefix, create);
    r.post(prefix, create);
    r.get(`${prefix}/:id`, (req) => webhooks.get(req.principal, scope(req), id(req)));
    r.patch(`${prefix}/:id`, async (req) => webhooks.update(req.principal, scope(req), id(req), await req.body(UpdateWebhookBody)));
    r.del(`${prefix}/:id`, (req) => webhooks.remove(req.principal, scope(req), id(req)));
    r.post(`${prefix}/:id/rotate-secret`, (req) => webhooks.rotateSecret(req.principal, scope(req), id(req)));
    r.post(`${prefix}/:id/test`, (req) => webhooks.test(req.principal, scope(req), id(req)));
    r.get(`${prefix}/:id/deliveries`, (req) => webhooks.deliveries(req.principal, scope(req), id(req), deliveryQuery(req)));
    r.get(`${prefix}/:id/deliveries/:delivery`, (req) => webhooks.delivery(req.principal, scope(req), id(req), req.param<string>('delivery')));
    r.post(`${prefix}/:id/deliveries/:delivery/redeliver`, (req) => webhooks.redeliver(req.principal, scope(req), id(req), req.param<string>('delivery')));
  }
}
