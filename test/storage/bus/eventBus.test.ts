import t from 'tap';
import pino from 'pino';
import { openEventBus, memoryEventBus, type BusEvent, type EventBus } from '../../../storage/index.js';
import { testDatabase } from '../../support/db.js';
import { eventually } from '../../support/events.js';

const REDIS_URL = process.env['KILN_TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const log = pino({ level: 'silent' });

function collect(bus: EventBus): BusEvent[] {
  const seen: BusEvent[] = [];
  bus.subscribe((e) => seen.push(e));
  return seen;
}

const event = (n: number, frame = `{"n":${n}}`): BusEvent => ({ event: 'worker.queue_depth', scope: { projectId: '7f1c2a9e-3b4d-4c5e-8f60-718293a4b5c6' }, frame });

for (const transport of ['postgres', 'redis'] as const) {
  t.test(`two processes on one database exchange events through ${transport}`, async (t) => {
    const { sql } = await testDatabase(t);
    const config = { 'redis.url': transport === 'redis' ? REDIS_URL : null };
    const a = await openEventBus(config, sql, log);
    const b = await openEventBus(config, sql, log);
    t.teardown(async () => {
      await a.close();
      await b.close();
    });
    t.equal(a.transport, transport);
    const seenA = collect(a);
    const seenB = collect(b);
    a.publish(event(1));
    b.publish(event(2));
    a.publish(event(3));
    // Larger than a NOTIFY payload: travels through event_relay with PostgreSQL.
    const big = event(4, JSON.stringify({ padding: 'x'.repeat(20_000) }));
    a.publish(big);
    await eventually('B receives A’s events', async () => (seenB.length >= 4 ? true : undefined));
    await eventually('A receives B’s event', async () => (seenA.length >= 4 ? true : undefined));
    t.same(seenA.map((e) => e.frame).sort(), [...['{"n":1}', '{"n":2}', '{"n":3}'], big.frame].sort(), 'A saw its own events and B’s');
    t.same(seenA.slice(0, 2).map((e) => e.frame), ['{"n":1}', '{"n":3}'], 'own events are delivered locally first, in order');
    t.same(seenB.filter((e) => e.frame !== big.frame).map((e) => e.frame).sort(), ['{"n":1}', '{"n":2}', '{"n":3}'], 'B saw A’s events once and its own');
    t.equal(seenB.find((e) => e.frame === big.frame)?.frame.length, big.frame.length, 'the large event arrived whole');
    t.same(seenB.find((e) => e.frame === '{"n":1}')?.scope, event(1).scope, 'the scope travels with the event');
    t.equal(seenA.filter((e) => e.frame === '{"n":1}').length, 1, 'a process never receives its own event twice');
  });
}

t.test('a turn of events larger than one NOTIFY goes through PostgreSQL as one relay row and one notice', async (t) => {
  const { sql } = await testDatabase(t);
  const a = await openEventBus({ 'redis.url': null }, sql, log);
  const b = await openEventBus({ 'redis.url': null }, sql, log);
  t.teardown(async () => {
    await a.close();
    await b.close();
  });
  const seenA = collect(a);
  const seenB = collect(b);
  const [before] = await sql<{ n: number }[]>`select count(*)::int as n from event_relay`;
  // 200 events of ~300 bytes in one turn: about 8 NOTIFY payloads' worth
  const frames = Array.from({ length: 200 }, (_, i) => JSON.stringify({ n: i, padding: 'y'.repeat(250) }));
  for (const [i, frame] of frames.entries()) a.publish(event(i, frame));
  await eventually('B receives the turn’s events', async () => (seenB.length >= frames.length ? true : undefined));
  t.same(seenB.map((e) => e.frame), frames, 'every event arrived once, in the order published');
  const [after] = await sql<{ n: number }[]>`select count(*)::int as n from event_relay`;
  t.equal(after!.n - before!.n, 1, 'one relay row for the whole turn');
  b.publish(event(999));
  await eventually('A receives B’s event', async () => (seenA.length > frames.length ? true : undefined));
  t.equal(seenA.length, frames.length + 1, 'A did not receive its own turn back from the relay row');
});

t.test('an unreachable Redis fails the start with a message naming redis.url', async (t) => {
  const { sql } = await testDatabase(t);
  await t.rejects(openEventBus({ 'redis.url': 'redis://127.0.0.1:1' }, sql, log), /cannot connect to Redis at 127\.0\.0\.1:1 \(redis\.url\) for the event bus/);
});

t.test('a listener that throws does not stop the others', async (t) => {
  const bus = await memoryEventBus(log);
  const seen: string[] = [];
  bus.subscribe(() => {
    throw new Error('boom');
  });
  bus.subscribe((e) => seen.push(e.frame));
  bus.publish(event(1));
  t.same(seen, ['{"n":1}']);
  await bus.close();
  bus.publish(event(2));
  t.same(seen, ['{"n":1}'], 'a closed bus publishes nothing');
});

for (const transport of ['postgres', 'redis'] as const) {
  t.test(`the lag of events relayed through ${transport} is observed by the receiver only`, async (t) => {
    const { sql } = await testDatabase(t);
    const config = { 'redis.url': transport === 'redis' ? REDIS_URL : null };
    const lagsA: number[] = [];
    const lagsB: number[] = [];
    // B's clock runs 3 s ahead of the sender's: every lag it sees is at least 3 s. A's runs 60 s
    // behind: a sender's clock ahead of the receiver's gives no negative lag, but 0.
    const a = await openEventBus(config, sql, log, { onRemoteLag: (s) => lagsA.push(s), now: () => Date.now() - 60_000 });
    const b = await openEventBus(config, sql, log, { onRemoteLag: (s) => lagsB.push(s), now: () => Date.now() + 3000 });
    t.teardown(async () => {
      await a.close();
      await b.close();
    });
    const seenB = collect(b);
    a.publish(event(1));
    a.publish(event(2));
    b.publish(event(3));
    await eventually('B receives A’s events', async () => (seenB.length >= 3 ? true : undefined));
    await eventually('A receives B’s event', async () => (lagsA.length >= 1 ? true : undefined));
    t.equal(lagsB.length, 2, 'one lag per event relayed from A; none for B’s own');
    t.ok(lagsB.every((s) => s >= 3), `lags ${lagsB.join(', ')} include the 3 s the clocks differ`);
    t.same(lagsA, [0], 'a sender ahead of the receiver counts as no lag');
  });
}
