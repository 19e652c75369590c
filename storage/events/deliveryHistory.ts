// The delivery history of one webhook or task action, newest first.
import type { ISql } from 'postgres';
import type { DeliveryTarget } from './outbox.js';

export interface DeliveryRow {
  id: string;
  event_id: string;
  event: string;
  status: string;
  attempts: number;
  max_attempts: number;
  next_attempt_at: Date | null;
  last_response_status: number | null;
  last_error: string | null;
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
}

export interface AttemptRow {
  attempt: number;
  started_at: Date;
  finished_at: Date;
  response_status: number | null;
  error: string | null;
  response_excerpt: string | null;
  next_attempt_at: Date | null;
}

export interface DeliveryQuery {
  status?: string;
  limit: number;
  offset: number;
}

const targetCondition = (sql: ISql, target: DeliveryTarget) =>
  'webhookId' in target ? sql`d.webhook_id = ${target.webhookId}` : sql`d.task_action_id = ${target.taskActionId}`;

const columns = (sql: ISql) => sql`
  select d.id, d.event_id, e.event, d.status, d.attempts, d.max_attempts, d.next_attempt_at, d.last_response_status,
         d.last_error, d.created_at, d.updated_at, d.finished_at
  from event_deliveries d join event_outbox e on e.id = d.event_id`;

export async function listDeliveries(sql: ISql, target: DeliveryTarget, q: DeliveryQuery): Promise<{ total: number; rows: DeliveryRow[] }> {
  const status = q.status ? sql`and d.status = ${q.status}` : sql``;
  const [count] = await sql<{ n: number }[]>`select count(*)::int as n from event_deliveries d where ${targetCondition(sql, target)} ${status}`;
  const rows = await sql<DeliveryRow[]>`
    ${columns(sql)} where ${targetCondition(sql, target)} ${status}
    order by d.created_at desc, d.id limit ${q.limit} offset ${q.offset}`;
  return { total: count?.n ?? 0, rows };
}

export async function findDelivery(sql: ISql, target: DeliveryTarget, id: string): Promise<(DeliveryRow & { body: string; attempt_log: AttemptRow[] }) | null> {
  const [row] = await sql<(DeliveryRow & { body: string })[]>`
    select d.id, d.event_id, e.event, e.body, d.status, d.attempts, d.max_attempts, d.next_attempt_at, d.last_response_status,
           d.last_error, d.created_at, d.updated_at, d.finished_at
    from event_deliveries d join event_outbox e on e.id = d.event_id
    where ${targetCondition(sql, target)} and d.id = ${id}`;
  if (!row) return null;
  const attempt_log = await sql<AttemptRow[]>`
    select attempt, started_at, finished_at, response_status, error, response_excerpt, next_attempt_at
    from event_delivery_attempts where delivery_id = ${id} order by attempt`;
  return { ...row, attempt_log };
}
