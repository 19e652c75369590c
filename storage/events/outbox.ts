// The transactional outbox: durable events become event_outbox rows and one pending delivery per
// matching webhook and task action, with a pg-boss job each, all in the caller's transaction.
import { randomUUID } from 'node:crypto';
import type { PgBoss } from 'pg-boss';
import type { TransactionSql } from 'postgres';
import { eventMatcher, type Audience, type EventScope } from '../../protocol/index.js';
import { enqueueDeliveries } from './deliveryJobs.js';

/** An event checked against the catalog and rendered, not yet written or published. */
export interface PreparedEvent {
  id: string;
  event: string;
  scope: EventScope;
  /** the envelope's JSON text: webhook body, WebSocket frame */
  frame: string;
  durable: boolean;
  audience: Audience;
  /** set once writing it queued a delivery job, so that publishing wakes this process's worker */
  queued?: boolean;
}

/** One webhook or task action that receives exactly one event (webhook.ping). */
export type DeliveryTarget = { webhookId: string } | { taskActionId: string };

export interface WrittenDelivery {
  id: string;
  eventId: string;
}

export interface WriteOutboxOptions {
  boss: PgBoss;
  /** deliver to this target only instead of matching subscribers */
  only?: DeliveryTarget;
  /**
   * The first attempt's job waits until then: the caller attempts at once itself, and the job only
   * catches a process that died before it could (its claim then finds the attempt taken).
   */
  firstAttemptAfter?: Date;
}

interface WebhookTarget {
  id: string;
  project_id: string | null;
  cache_id: string | null;
  events: string[];
}

interface TaskActionTarget {
  id: string;
  task_id: string;
  events: string[];
}

// Task actions report their own runs as task.action.update; sending those to task actions again
// would make every run a new run. The other task.action.* events stay away from them too, so an
// action never receives news about itself.
const notForTaskActions = (event: string): boolean => event.startsWith('task.action.');

const distinct = (values: (string | undefined)[]): string[] => [...new Set(values.filter((v): v is string => v !== undefined))];

export async function writeOutbox(tx: TransactionSql, events: readonly PreparedEvent[], opts: WriteOutboxOptions): Promise<WrittenDelivery[]> {
  if (events.length === 0) return [];
  const ids = events.map((e) => e.id);
  const names = events.map((e) => e.event);
  const bodies = events.map((e) => e.frame);
  const scoped = (key: keyof EventScope) => events.map((e) => e.scope[key] ?? null);
  // The rows and the lookup of who receives them go out together: a transaction's statements issued
  // at once are pipelined on its connection, one round trip instead of three (the scheduler's status
  // batches wait for this before they commit). The rows go as arrays, so the statement's text is the
  // same for any number of events: as a VALUES list it was a new statement per count, which
  // PostgreSQL parsed and planned afresh and postgres.js described first, one round trip more
  // (half of a dispatch's outbox inserts; issue 23).
  const insert = tx`
    insert into event_outbox (id, event, body, organization_id, project_id, task_id, evaluation_id, build_id, cache_id, user_id)
    select * from unnest(${ids}::uuid[], ${names}::text[], ${bodies}::text[], ${scoped('organizationId')}::uuid[], ${scoped('projectId')}::uuid[],
      ${scoped('taskId')}::uuid[], ${scoped('evaluationId')}::uuid[], ${scoped('buildId')}::uuid[], ${scoped('cacheId')}::uuid[], ${scoped('userId')}::uuid[])`.execute();
  const [targets] = await Promise.all([opts.only ? null : findTargets(tx, events), insert]);

  const deliveries: { id: string; event_id: string; webhook_id: string | null; task_action_id: string | null }[] = [];
  if (opts.only) {
    const only = opts.only;
    for (const e of events) {
      deliveries.push({
        id: randomUUID(),
        event_id: e.id,
        webhook_id: 'webhookId' in only ? only.webhookId : null,
        task_action_id: 'taskActionId' in only ? only.taskActionId : null,
      });
    }
  } else {
    const { webhooks, actions } = targets!;
    for (const e of events) {
      for (const w of webhooks) {
        if (receives(w, e) && eventMatcher(w.events)(e.event)) deliveries.push({ id: randomUUID(), event_id: e.id, webhook_id: w.id, task_action_id: null });
      }
      if (e.audience !== 'scope' || e.scope.taskId === undefined || notForTaskActions(e.event)) continue;
      for (const a of actions) {
        if (a.task_id === e.scope.taskId && eventMatcher(a.events)(e.event)) deliveries.push({ id: randomUUID(), event_id: e.id, webhook_id: null, task_action_id: a.id });
      }
    }
  }
  for (let i = 0; i < deliveries.length; i += 1000) {
    await tx`insert into event_deliveries ${tx(deliveries.slice(i, i + 1000))}`;
  }
  const startAfter = opts.firstAttemptAfter;
  await enqueueDeliveries(opts.boss, tx, deliveries.map((d) => ({ delivery: d.id, attempt: 1, ...(startAfter ? { startAfter } : {}) })));
  return deliveries.map((d) => ({ id: d.id, eventId: d.event_id }));
}

/**
 * A new delivery of an event already in the outbox, to one webhook or task action (redeliver): a
 * fresh series of attempts under a new delivery id, the same body. Null when the event is gone.
 */
export async function writeRedelivery(
  tx: TransactionSql, eventId: string, target: DeliveryTarget, opts: { boss: PgBoss; firstAttemptAfter?: Date },
): Promise<WrittenDelivery | null> {
  const [event] = await tx<{ id: string }[]>`select id from event_outbox where id = ${eventId}`;
  if (!event) return null;
  const id = randomUUID();
  await tx`insert into event_deliveries ${tx({
    id, event_id: eventId,
    webhook_id: 'webhookId' in target ? target.webhookId : null,
    task_action_id: 'taskActionId' in target ? target.taskActionId : null,
  })}`;
  await enqueueDeliveries(opts.boss, tx, [{ delivery: id, attempt: 1, ...(opts.firstAttemptAfter ? { startAfter: opts.firstAttemptAfter } : {}) }]);
  return { id, eventId };
}

/** Instance webhooks receive every durable event; project and cache webhooks their scope's, never account activity. */
function receives(w: WebhookTarget, e: PreparedEvent): boolean {
  if (w.project_id === null && w.cache_id === null) return true;
  if (e.audience !== 'scope') return false;
  if (w.project_id !== null) return e.scope.projectId === w.project_id;
  return e.scope.cacheId === w.cache_id;
}

async function findTargets(tx: TransactionSql, events: readonly PreparedEvent[]): Promise<{ webhooks: WebhookTarget[]; actions: TaskActionTarget[] }> {
  const projects = distinct(events.map((e) => e.scope.projectId));
  const caches = distinct(events.map((e) => e.scope.cacheId));
  const tasks = distinct(events.map((e) => e.scope.taskId));
  // both lookups at once (pipelined)
  const [webhooks, actions] = await Promise.all([
    tx<WebhookTarget[]>`
      select id, project_id, cache_id, events from webhooks
      where active and ((project_id is null and cache_id is null)
        or project_id = any(${projects}::uuid[]) or cache_id = any(${caches}::uuid[]))`.execute(),
    // open_pr actions run after a successful evaluation (services/gitHosts/openPrRuns.ts), never for events
    tasks.length === 0 ? [] : tx<TaskActionTarget[]>`
      select id, task_id, events from task_actions where active and kind <> 'open_pr' and task_id = any(${tasks}::uuid[])`.execute(),
  ]);
  return { webhooks, actions };
}
