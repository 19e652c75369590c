// A real event emitter on a test database, without a server: an in-process bus (recording what is
// published) and pg-boss on that database, for service tests that emit (accessFixture, identity).
import pino from 'pino';
import type { Sql } from 'postgres';
import type { Test } from 'tap';
import { createEvents, ensureDeliveryQueue, memoryEventBus, startQueue, stopQueue, type BusEvent, type Events } from '../../storage/index.js';

export interface TestEvents {
  events: Events;
  /** every event published on the bus (after its commit), in order */
  published: BusEvent[];
}

export async function testEvents(t: Pick<Test, 'teardown'>, db: { url: string; sql: Sql }): Promise<TestEvents> {
  const log = pino({ level: 'silent' });
  const boss = await startQueue(db.url, log, { maxConnections: 2 });
  t.teardown(() => stopQueue(boss, { timeoutMs: 2000 }));
  await ensureDeliveryQueue(boss);
  const bus = await memoryEventBus(log);
  const published: BusEvent[] = [];
  bus.subscribe((e) => published.push(e));
  return { events: createEvents({ sql: db.sql, bus, boss }), published };
}
