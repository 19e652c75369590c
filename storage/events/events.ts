// How kiln emits events. A durable event is written to the outbox in the transaction of the change
// it reports, with a pending delivery per matching webhook and task action; every event, durable
// or not, goes on the bus after the commit. A rollback emits nothing.
//
//   await events.transaction(async (tx, emit) => {
//     await tx`update caches set active = false where id = ${id}`;
//     emit('cache.update', { cache: 'main', cache_id: id, changes: ['active'] }, { cacheId: id });
//   });
//   events.publish('worker.queue_depth', { queued: 12 });             // live-only, no transaction
import { randomUUID } from 'node:crypto';
import type { PgBoss } from 'pg-boss';
import type { Sql, TransactionSql } from 'postgres';
import { checkEventContent, isDurable, renderEnvelope, type EventContent, type EventName, type EventScope } from '../../protocol/index.js';
import type { EventBus } from '../bus/index.js';
import { pipelinedTransaction } from '../db/index.js';
import { writeOutbox, writeRedelivery, type DeliveryTarget, type PreparedEvent, type WrittenDelivery } from './outbox.js';

export type Emit = <N extends EventName>(name: N, content: EventContent<N>, scope?: EventScope) => void;

export interface Events {
  readonly bus: EventBus;
  /**
   * Runs `fn` in a transaction on the events' pool. `emit` checks the content against the catalog
   * at once (a bad content throws, so the transaction rolls back) and writes the durable events
   * when `fn` returns, before the commit. `pipelined`: `begin` goes out with the first statement
   * (storage/db/pipelinedTransaction.ts; one round trip fewer, no savepoints), for hot paths;
   * `genericPlans` (with `pipelined`): its statements run on their cached generic plans.
   */
  transaction<T>(fn: (tx: TransactionSql, emit: Emit) => Promise<T>, opts?: { pipelined?: boolean; genericPlans?: boolean }): Promise<T>;
  /**
   * For a transaction the caller opened itself: writes the event now, in `tx`. Publish the returned
   * events with afterCommit() once the transaction has committed.
   */
  emit<N extends EventName>(tx: TransactionSql, name: N, content: EventContent<N>, scope?: EventScope): Promise<PreparedEvent>;
  /** Publishes events written with emit(tx, …) whose transaction committed. */
  afterCommit(events: readonly PreparedEvent[]): void;
  /** A non-durable event, on the bus at once; a durable one throws (it belongs in a transaction). */
  publish<N extends EventName>(name: N, content: EventContent<N>, scope?: EventScope): void;
  /**
   * Writes one event for one webhook or task action only (webhook.ping), for the caller to attempt
   * at once; its job is a fallback that fires after `fallbackMs`.
   */
  emitTo<N extends EventName>(
    tx: TransactionSql, target: DeliveryTarget, name: N, content: EventContent<N>, scope?: EventScope, fallbackMs?: number,
  ): Promise<{ event: PreparedEvent; delivery: WrittenDelivery }>;
  /**
   * A new delivery of an event already written (POST …/deliveries/{id}/redeliver) to one webhook or
   * task action, for the caller to attempt at once; its job is a fallback after `fallbackMs`. Null
   * when the event no longer exists.
   */
  redeliver(tx: TransactionSql, target: DeliveryTarget, eventId: string, fallbackMs?: number): Promise<WrittenDelivery | null>;
  /** Called after a commit that queued deliveries, so this process's worker fetches at once. */
  onDeliveriesQueued(listener: () => void): void;
  /** The same events, with transaction() on another pool (the scheduler's, the cache's). */
  withPool(sql: Sql): Events;
}

export interface EventsOptions {
  sql: Sql;
  bus: EventBus;
  boss: PgBoss;
  /** epoch ms for `at`; tests pass their own */
  now?: () => number;
}

export function createEvents(opts: EventsOptions): Events {
  return eventsOn(opts.sql, opts, []);
}

function eventsOn(sql: Sql, opts: EventsOptions, queuedListeners: (() => void)[]): Events {
  const now = opts.now ?? Date.now;

  function prepare(name: string, content: unknown, scope: EventScope = {}): PreparedEvent {
    const checked = checkEventContent(name, content);
    if (!checked.ok) throw new Error(`cannot emit ${name}: ${checked.field}: ${checked.reason}`);
    const { definition, content: valid } = checked.value;
    return {
      id: randomUUID(),
      event: name,
      scope,
      frame: renderEnvelope(name, now(), valid),
      durable: isDurable(definition, valid),
      audience: definition.audience,
    };
  }

  function publishAll(events: readonly PreparedEvent[], queued: boolean): void {
    for (const e of events) opts.bus.publish({ event: e.event, scope: e.scope, frame: e.frame });
    if (queued) for (const listener of queuedListeners) listener();
  }

  async function write(tx: TransactionSql, events: readonly PreparedEvent[]): Promise<boolean> {
    const durable = events.filter((e) => e.durable);
    const deliveries = await writeOutbox(tx, durable, { boss: opts.boss });
    return deliveries.length > 0;
  }

  return {
    bus: opts.bus,

    async transaction<T>(fn: (tx: TransactionSql, emit: Emit) => Promise<T>, transactionOpts: { pipelined?: boolean; genericPlans?: boolean } = {}): Promise<T> {
      const pending: PreparedEvent[] = [];
      let queued = false;
      const body = async (tx: TransactionSql) => {
        const emit: Emit = (name, content, scope) => {
          pending.push(prepare(name, content, scope));
        };
        const value = await fn(tx, emit);
        queued = await write(tx, pending);
        return value;
      };
      const result = transactionOpts.pipelined
        ? await pipelinedTransaction(sql, body, { genericPlans: transactionOpts.genericPlans === true })
        : await sql.begin(body);
      publishAll(pending, queued);
      return result as T;
    },

    async emit(tx, name, content, scope) {
      const event = prepare(name, content, scope);
      if (await write(tx, [event])) event.queued = true;
      return event;
    },

    afterCommit(events) {
      publishAll(events, events.some((e) => e.queued === true));
    },

    publish(name, content, scope) {
      const event = prepare(name, content, scope);
      if (event.durable) throw new Error(`${name} is durable here: emit it inside events.transaction() so that it is written with the change it reports`);
      publishAll([event], false);
    },

    async emitTo(tx, target, name, content, scope, fallbackMs = 30_000) {
      const event = prepare(name, content, scope);
      const [delivery] = await writeOutbox(tx, [event], { boss: opts.boss, only: target, firstAttemptAfter: new Date(now() + fallbackMs) });
      return { event, delivery: delivery! };
    },

    redeliver(tx, target, eventId, fallbackMs = 30_000) {
      return writeRedelivery(tx, eventId, target, { boss: opts.boss, firstAttemptAfter: new Date(now() + fallbackMs) });
    },

    onDeliveriesQueued(listener) {
      queuedListeners.push(listener);
    },

    withPool(other) {
      return eventsOn(other, opts, queuedListeners);
    },
  };
}
