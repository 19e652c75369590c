// The delivery rows as the WebhookDelivery actors move them: claim an attempt, record its outcome,
// take back attempts whose process died. Every change checks the row's status and attempt count,
// so a stale job or a late outcome changes nothing.
import type { Sql, TransactionSql } from 'postgres';
import type { DueAttempt } from './deliveryJobs.js';
import { leaseLostCondition } from '../db/index.js';

export type AttemptStatus = 'delivered' | 'retrying' | 'dead';

/** A delivery whose attempt this process now runs, with what it needs to send it. */
export interface ClaimedRow {
  id: string;
  attempt: number;
  max_attempts: number;
  event: string;
  body: string;
  webhook_id: string | null;
  webhook_url: string | null;
  webhook_secret: Buffer | null;
  webhook_active: boolean | null;
  task_action_id: string | null;
  action_name: string | null;
  action_kind: 'send_web_request' | 'send_mail' | null;
  action_url: string | null;
  action_secret: Buffer | null;
  mail_to: string[] | null;
  action_active: boolean | null;
  task_id: string | null;
  task_name: string | null;
  project_id: string | null;
  project_label: string | null;
}

/** Claims the due attempts that still match their rows; the others (stale jobs) are skipped. */
export async function claimAttempts(sql: Sql, due: readonly DueAttempt[], instanceKey: number): Promise<ClaimedRow[]> {
  if (due.length === 0) return [];
  return sql<ClaimedRow[]>`
    with due as (
      select * from unnest(${due.map((d) => d.delivery)}::uuid[], ${due.map((d) => d.attempt)}::int[]) as j(id, attempt)),
    claimed as (
      update event_deliveries d
      set status = 'attempting', attempts = d.attempts + 1, claimed_by = ${instanceKey}, next_attempt_at = null, updated_at = now()
      from due
      where d.id = due.id and d.status in ('pending', 'retrying') and d.attempts = due.attempt - 1
      returning d.id, d.attempts, d.max_attempts, d.event_id, d.webhook_id, d.task_action_id)
    select c.id, c.attempts as attempt, c.max_attempts, e.event, e.body,
           c.webhook_id, w.url as webhook_url, w.secret as webhook_secret, w.active as webhook_active,
           c.task_action_id, a.name as action_name, a.kind as action_kind, a.url as action_url,
           a.secret as action_secret, a.mail_to, a.active as action_active,
           a.task_id, t.name as task_name, t.project_id, o.name || '/' || p.name as project_label
    from claimed c
    join event_outbox e on e.id = c.event_id
    left join webhooks w on w.id = c.webhook_id
    left join task_actions a on a.id = c.task_action_id
    left join tasks t on t.id = a.task_id
    left join projects p on p.id = t.project_id
    left join organizations o on o.id = p.organization_id`;
}

/**
 * Retries due at `now`, oldest first. next_attempt_at is written from the delivery engine's clock,
 * while a job's startAfter is compared with the database's; this finds them by the engine's.
 */
export async function dueRetries(sql: Sql, now: Date, limit: number): Promise<DueAttempt[]> {
  return sql<DueAttempt[]>`
    select id as delivery, attempts + 1 as attempt from event_deliveries
    where status = 'retrying' and next_attempt_at <= ${now}
    order by next_attempt_at limit ${limit}`;
}

export interface AttemptOutcomeRow {
  deliveryId: string;
  attempt: number;
  status: AttemptStatus;
  startedAt: Date;
  finishedAt: Date;
  responseStatus: number | null;
  error: string | null;
  excerpt: string | null;
  nextAttemptAt: Date | null;
}

/** Records attempts and moves their deliveries on; returns the ids whose row it moved. */
export async function recordAttempts(tx: TransactionSql, outcomes: readonly AttemptOutcomeRow[]): Promise<Set<string>> {
  if (outcomes.length === 0) return new Set();
  const attempts = outcomes.map((o) => ({
    delivery_id: o.deliveryId,
    attempt: o.attempt,
    started_at: o.startedAt,
    finished_at: o.finishedAt,
    response_status: o.responseStatus,
    error: o.error,
    response_excerpt: o.excerpt,
    next_attempt_at: o.nextAttemptAt,
  }));
  await tx`
    insert into event_delivery_attempts ${tx(attempts)}
    on conflict (delivery_id, attempt) do update set
      started_at = excluded.started_at, finished_at = excluded.finished_at, response_status = excluded.response_status,
      error = excluded.error, response_excerpt = excluded.response_excerpt, next_attempt_at = excluded.next_attempt_at`;
  const moved = await tx<{ id: string }[]>`
    update event_deliveries d set
      status = v.status, next_attempt_at = v.next_attempt_at, last_response_status = v.response_status,
      last_error = v.error, claimed_by = null, updated_at = now(),
      finished_at = case when v.status in ('delivered', 'dead') then now() end
    from unnest(
      ${outcomes.map((o) => o.deliveryId)}::uuid[], ${outcomes.map((o) => o.attempt)}::int[], ${outcomes.map((o) => o.status)}::text[],
      ${outcomes.map((o) => o.nextAttemptAt?.toISOString() ?? null)}::timestamptz[],
      ${outcomes.map((o) => o.responseStatus)}::int[], ${outcomes.map((o) => o.error)}::text[]
    ) as v(id, attempt, status, next_attempt_at, response_status, error)
    where d.id = v.id and d.attempts = v.attempt and d.status = 'attempting'
    returning d.id`;
  return new Set(moved.map((r) => r.id));
}

export const INTERRUPTED = 'interrupted: the server process stopped during the attempt';

export interface RecoveredRow {
  id: string;
  attempts: number;
  status: 'retrying' | 'dead';
}

export interface OwnAttempts {
  /** this process's lease key */
  key: number;
  /** deliveries this process is attempting right now */
  running: readonly string[];
}

/**
 * Attempts whose process died (its lease is gone), and attempts of this process that nothing runs
 * any more (their outcome could not be written) for a minute: the attempt counts, and the delivery
 * is due again at once or, after its last attempt, dead. The caller queues the jobs in the same
 * transaction.
 */
export async function recoverInterrupted(tx: TransactionSql, own: OwnAttempts): Promise<RecoveredRow[]> {
  return tx<RecoveredRow[]>`
    with stale as (
      select d.id, d.attempts, d.max_attempts, d.updated_at from event_deliveries d
      where d.status = 'attempting' and d.claimed_by is not null
        and (${leaseLostCondition(tx)}
          or (d.claimed_by = ${own.key} and d.id <> all(${own.running}::uuid[]) and d.updated_at < now() - interval '1 minute'))
      for update skip locked),
    recorded as (
      insert into event_delivery_attempts (delivery_id, attempt, started_at, finished_at, error, next_attempt_at)
      select id, attempts, updated_at, now(), ${INTERRUPTED}, case when attempts < max_attempts then now() end from stale
      on conflict do nothing)
    update event_deliveries d set
      status = case when s.attempts >= s.max_attempts then 'dead' else 'retrying' end,
      next_attempt_at = case when s.attempts >= s.max_attempts then null else now() end,
      finished_at = case when s.attempts >= s.max_attempts then now() end,
      claimed_by = null, last_error = ${INTERRUPTED}, last_response_status = null, updated_at = now()
    from stale s where d.id = s.id
    returning d.id, d.attempts, d.status`;
}

/** The row of one delivery as the supervisor's rehydrate() needs it. */
export async function deliveryState(sql: Sql, id: string): Promise<{ status: string; attempts: number; claimed_by: number | null } | null> {
  const [row] = await sql<{ status: string; attempts: number; claimed_by: number | null }[]>`
    select status, attempts, claimed_by from event_deliveries where id = ${id}`;
  return row ?? null;
}

/** retentionDays: finished deliveries, then events no delivery points to any more, in slices. */
export async function deleteExpired(sql: Sql, retentionDays: number): Promise<{ deliveries: number; events: number }> {
  if (retentionDays <= 0) return { deliveries: 0, events: 0 };
  let deliveries = 0;
  let events = 0;
  for (;;) {
    const gone = await sql`
      delete from event_deliveries where id in (
        select id from event_deliveries where finished_at < now() - make_interval(days => ${retentionDays}) limit 5000)`;
    deliveries += gone.count;
    if (gone.count < 5000) break;
  }
  for (;;) {
    const gone = await sql`
      delete from event_outbox where id in (
        select e.id from event_outbox e
        where e.created_at < now() - make_interval(days => ${retentionDays})
          and not exists (select from event_deliveries d where d.event_id = e.id)
        limit 5000)`;
    events += gone.count;
    if (gone.count < 5000) break;
  }
  return { deliveries, events };
}
