// Webhook rows. A webhook belongs to a project, a cache or the instance; every query names the
// scope, so a webhook id from another scope is simply not found.
import type { ISql } from 'postgres';

export type WebhookScope = { kind: 'project'; projectId: string } | { kind: 'cache'; cacheId: string } | { kind: 'instance' };

export interface WebhookRow {
  id: string;
  project_id: string | null;
  cache_id: string | null;
  url: string;
  events: string[];
  active: boolean;
  description: string;
  created_at: Date;
  updated_at: Date;
  /** status of the newest delivery, null when there was none */
  last_delivery_status: string | null;
  last_delivery_at: Date | null;
}

export interface NewWebhook {
  url: string;
  events: string[];
  active: boolean;
  description: string;
  /** sealed signing secret */
  secret: Buffer;
  createdBy: string | null;
}

export interface WebhookPatch {
  url?: string;
  events?: string[];
  active?: boolean;
  description?: string;
}

const scopeCondition = (sql: ISql, scope: WebhookScope) =>
  scope.kind === 'project' ? sql`w.project_id = ${scope.projectId}`
  : scope.kind === 'cache' ? sql`w.cache_id = ${scope.cacheId}`
  : sql`w.project_id is null and w.cache_id is null`;

const columns = (sql: ISql) => sql`
  select w.id, w.project_id, w.cache_id, w.url, w.events, w.active, w.description, w.created_at, w.updated_at,
         last.status as last_delivery_status, last.created_at as last_delivery_at
  from webhooks w
  left join lateral (
    select d.status, d.created_at from event_deliveries d where d.webhook_id = w.id order by d.created_at desc limit 1
  ) last on true`;

export async function listWebhooks(sql: ISql, scope: WebhookScope): Promise<WebhookRow[]> {
  return sql<WebhookRow[]>`${columns(sql)} where ${scopeCondition(sql, scope)} order by w.created_at, w.id`;
}

export async function findWebhook(sql: ISql, scope: WebhookScope, id: string): Promise<WebhookRow | null> {
  const [row] = await sql<WebhookRow[]>`${columns(sql)} where ${scopeCondition(sql, scope)} and w.id = ${id}`;
  return row ?? null;
}

export async function insertWebhook(sql: ISql, scope: WebhookScope, hook: NewWebhook): Promise<string> {
  const [row] = await sql<{ id: string }[]>`
    insert into webhooks (project_id, cache_id, url, events, active, description, secret, created_by)
    values (${scope.kind === 'project' ? scope.projectId : null}, ${scope.kind === 'cache' ? scope.cacheId : null},
            ${hook.url}, ${hook.events}, ${hook.active}, ${hook.description}, ${hook.secret}, ${hook.createdBy})
    returning id`;
  return row!.id;
}

export async function updateWebhook(sql: ISql, scope: WebhookScope, id: string, patch: WebhookPatch): Promise<boolean> {
  const rows = await sql`
    update webhooks w set
      url = coalesce(${patch.url ?? null}, w.url),
      events = coalesce(${patch.events ?? null}::text[], w.events),
      active = coalesce(${patch.active ?? null}::boolean, w.active),
      description = coalesce(${patch.description ?? null}, w.description),
      updated_at = now()
    where ${scopeCondition(sql, scope)} and w.id = ${id}
    returning w.id`;
  return rows.length > 0;
}

export async function replaceWebhookSecret(sql: ISql, scope: WebhookScope, id: string, secret: Buffer): Promise<boolean> {
  const rows = await sql`update webhooks w set secret = ${secret}, updated_at = now() where ${scopeCondition(sql, scope)} and w.id = ${id} returning w.id`;
  return rows.length > 0;
}

export async function deleteWebhook(sql: ISql, scope: WebhookScope, id: string): Promise<boolean> {
  const rows = await sql`delete from webhooks w where ${scopeCondition(sql, scope)} and w.id = ${id} returning w.id`;
  return rows.length > 0;
}
