// Webhooks of a project, a cache or the instance: CRUD, rotate-secret, a test ping and the
// delivery history (spec: Webhooks). The secret is shown on create and rotate-secret only.
import type { Sql } from 'postgres';
import { ApiError, type CreateWebhookBody, type DeliveryListQuery, type UpdateWebhookBody } from '../../protocol/index.js';
import {
  deleteWebhook,
  findDelivery,
  findWebhook,
  insertWebhook,
  listDeliveries,
  listWebhooks,
  replaceWebhookSecret,
  updateWebhook,
  type Events,
  type OutboundClient,
  type SecretBox,
  type WebhookRow,
} from '../../storage/index.js';
import type { DeliveryEngine } from './deliveryEngine.js';
import { deliveryNotFound, pageOf, toDeliveryDetail, toDeliveryView, type DeliveryDetail, type DeliveryPage } from './deliveryViews.js';
import { demandAllowedDestination } from '../access/index.js';
import type { Principal } from '../access/index.js';
import { newSigningSecret } from './signingSecret.js';
import type { ResolvedWebhookScope, WebhookAuthorizer, WebhookScopeRef } from './webhookScopes.js';

export interface WebhookView {
  id: string;
  scope: 'project' | 'cache' | 'instance';
  project?: string;
  cache?: string;
  url: string;
  events: string[];
  active: boolean;
  description: string;
  created_at: Date;
  updated_at: Date;
  last_delivery: { status: string; at: Date } | null;
}

export interface WebhookWithSecret extends WebhookView {
  /** the signing secret; shown only now */
  secret: string;
}

export interface WebhooksDeps {
  sql: Sql;
  events: Events;
  engine: Pick<DeliveryEngine, 'deliverNow'>;
  secretBox: SecretBox;
  authorize: WebhookAuthorizer;
  /** where deliveries may go (outbound.allowedNetworks) */
  outbound: Pick<OutboundClient, 'refusalOf'>;
}

function view(row: WebhookRow, where: ResolvedWebhookScope): WebhookView {
  return {
    id: row.id,
    scope: where.scope.kind,
    ...(where.project ? { project: where.project } : {}),
    ...(where.cache ? { cache: where.cache } : {}),
    url: row.url,
    events: row.events,
    active: row.active,
    description: row.description,
    created_at: row.created_at,
    updated_at: row.updated_at,
    last_delivery: row.last_delivery_status && row.last_delivery_at ? { status: row.last_delivery_status, at: row.last_delivery_at } : null,
  };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const notFound = (id: string) => new ApiError('not_found', `no webhook ${id} here`);

export function webhooksService({ sql, events, engine, secretBox, authorize, outbound }: WebhooksDeps) {
  async function webhook(who: Principal, ref: WebhookScopeRef, id: string): Promise<{ row: WebhookRow; where: ResolvedWebhookScope }> {
    const where = await authorize(who, ref);
    const row = UUID.test(id) ? await findWebhook(sql, where.scope, id) : null;
    if (!row) throw notFound(id);
    return { row, where };
  }

  return {
    async list(who: Principal, ref: WebhookScopeRef): Promise<WebhookView[]> {
      const where = await authorize(who, ref);
      return (await listWebhooks(sql, where.scope)).map((row) => view(row, where));
    },

    async get(who: Principal, ref: WebhookScopeRef, id: string): Promise<WebhookView> {
      const { row, where } = await webhook(who, ref, id);
      return view(row, where);
    },

    async create(who: Principal, ref: WebhookScopeRef, body: CreateWebhookBody): Promise<WebhookWithSecret> {
      const where = await authorize(who, ref);
      await demandAllowedDestination(outbound, 'url', body.url);
      const secret = newSigningSecret(secretBox);
      const id = await insertWebhook(sql, where.scope, {
        url: body.url,
        events: body.events,
        active: body.active,
        description: body.description,
        secret: secret.sealed,
        createdBy: who.kind === 'user' ? who.userId : null,
      });
      return { ...view((await findWebhook(sql, where.scope, id))!, where), secret: secret.text };
    },

    async update(who: Principal, ref: WebhookScopeRef, id: string, body: UpdateWebhookBody): Promise<WebhookView> {
      const { where } = await webhook(who, ref, id);
      if (body.url !== undefined) await demandAllowedDestination(outbound, 'url', body.url);
      if (!(await updateWebhook(sql, where.scope, id, body))) throw notFound(id);
      return view((await findWebhook(sql, where.scope, id))!, where);
    },

    async remove(who: Principal, ref: WebhookScopeRef, id: string): Promise<string> {
      const { where } = await webhook(who, ref, id);
      if (!(await deleteWebhook(sql, where.scope, id))) throw notFound(id);
      return `webhook ${id} deleted`;
    },

    async rotateSecret(who: Principal, ref: WebhookScopeRef, id: string): Promise<WebhookWithSecret> {
      const { where } = await webhook(who, ref, id);
      const secret = newSigningSecret(secretBox);
      if (!(await replaceWebhookSecret(sql, where.scope, id, secret.sealed))) throw notFound(id);
      return { ...view((await findWebhook(sql, where.scope, id))!, where), secret: secret.text };
    },

    /** Sends webhook.ping at once and returns the recorded delivery; a disabled webhook is refused. */
    async test(who: Principal, ref: WebhookScopeRef, id: string): Promise<DeliveryDetail> {
      const { row, where } = await webhook(who, ref, id);
      if (!row.active) throw new ApiError('webhook_disabled', `webhook ${id} is disabled; enable it before testing it`);
      const written = await events.transaction((tx) =>
        events.emitTo(tx, { webhookId: id }, 'webhook.ping', {
          webhook_id: id,
          scope: where.scope.kind,
          ...(where.project ? { project: where.project } : {}),
          ...(where.cache ? { cache: where.cache } : {}),
          message: 'a test delivery from kiln',
        }, where.eventScope),
      );
      events.afterCommit([written.event]);
      await engine.deliverNow(written.delivery.id);
      const delivery = await findDelivery(sql, { webhookId: id }, written.delivery.id);
      if (!delivery) throw deliveryNotFound(written.delivery.id);
      return toDeliveryDetail(delivery);
    },

    /**
     * Sends a finished delivery's event again, at once, as a new delivery (its own id and six
     * attempts, the same body); answers the new delivery. 409 while the original is still under way.
     */
    async redeliver(who: Principal, ref: WebhookScopeRef, id: string, deliveryId: string): Promise<DeliveryDetail> {
      const { row } = await webhook(who, ref, id);
      const original = UUID.test(deliveryId) ? await findDelivery(sql, { webhookId: id }, deliveryId) : null;
      if (!original) throw deliveryNotFound(deliveryId);
      if (original.status !== 'delivered' && original.status !== 'dead') {
        throw new ApiError('delivery_in_progress', `delivery ${deliveryId} is ${original.status}; it can be redelivered once it is delivered or dead`);
      }
      if (!row.active) throw new ApiError('webhook_disabled', `webhook ${id} is disabled; enable it before redelivering`);
      const written = await events.transaction((tx) => events.redeliver(tx, { webhookId: id }, original.event_id));
      if (!written) throw deliveryNotFound(deliveryId);
      await engine.deliverNow(written.id);
      const delivery = await findDelivery(sql, { webhookId: id }, written.id);
      if (!delivery) throw deliveryNotFound(written.id);
      return toDeliveryDetail(delivery);
    },

    async deliveries(who: Principal, ref: WebhookScopeRef, id: string, query: DeliveryListQuery): Promise<DeliveryPage> {
      await webhook(who, ref, id);
      const { total, rows } = await listDeliveries(sql, { webhookId: id }, pageOf(query));
      return { deliveries: rows.map(toDeliveryView), page: query.page, per_page: query.per_page, total };
    },

    async delivery(who: Principal, ref: WebhookScopeRef, id: string, deliveryId: string): Promise<DeliveryDetail> {
      await webhook(who, ref, id);
      const row = UUID.test(deliveryId) ? await findDelivery(sql, { webhookId: id }, deliveryId) : null;
      if (!row) throw deliveryNotFound(deliveryId);
      return toDeliveryDetail(row);
    },
  };
}
export type WebhooksService = ReturnType<typeof webhooksService>;
