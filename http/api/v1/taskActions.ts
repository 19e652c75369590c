// Task actions: /tasks/{project}/{task}/actions with the sub-resources of webhooks (rotate-secret
// for send_web_request actions, the delivery history).
import { CreateTaskActionBody, ProjectRef, ResourceName, UpdateTaskActionBody } from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import type { Req } from '../../request.js';
import type { Router } from '../../router.js';
import { deliveryQuery } from './webhooks.js';

export function taskActionsRoutes(r: Router<Principal>, { events: { taskActions: actions } }: Pick<Services, 'events'>): void {
  const project = (req: Req<Principal>) => req.param('project', ProjectRef);
  const task = (req: Req<Principal>) => req.param('task', ResourceName);
  const id = (req: Req<Principal>) => req.param<string>('id');
  const base = '/tasks/:project/:task/actions';
  const create = async (req: Req<Principal>) => actions.create(req.principal, project(req), task(req), await req.body(CreateTaskActionBody));
  r.get(base, (req) => actions.list(req.principal, project(req), task(req)));
  r.put(base, create);
  r.post(base, create);
  r.get(`${base}/:id`, (req) => actions.get(req.principal, project(req), task(req), id(req)));
  r.patch(`${base}/:id`, async (req) => actions.update(req.principal, project(req), task(req), id(req), await req.body(UpdateTaskActionBody)));
  r.del(`${base}/:id`, (req) => actions.remove(req.principal, project(req), task(req), id(req)));
  r.post(`${base}/:id/rotate-secret`, (req) => actions.rotateSecret(req.principal, project(req), task(req), id(req)));
  r.get(`${base}/:id/deliveries`, (req) => actions.deliveries(req.principal, project(req), task(req), id(req), deliveryQuery(req)));
  r.get(`${base}/:id/deliveries/:delivery`, (req) => actions.delivery(req.principal, project(req), task(req), id(req), req.param<string>('delivery')));
}
