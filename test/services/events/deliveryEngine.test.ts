import t, { type Test } from 'tap';
import { verifySignature } from '../../../protocol/index.js';
import { signUp } from '../../support/accounts.js';
import { eventually, startEventKiln, startReceiver, type Receiver } from '../../support/events.js';
import type { TestKiln } from '../../support/kiln.js';

// Deliveries end to end: a real kiln, a real HTTP receiver, pg-boss driving the attempts. The
// schedule is the documented one scaled down (100 … 500 ms instead of 30 s … 8 min): what is
// checked is that each attempt is scheduled exactly its wait after the previous one failed.

const SCALED = [100, 200, 300, 400, 500];

async function setup(t: Test) {
  const kiln = await startEventKiln(t, { options: { events: { policy: { retryDelaysMs: SCALED }, pollingIntervalSeconds: 0.5 } } });
  const receiver = await startReceiver(t);
  const ada = await signUp(kiln, 'ada');
  const hook = await kiln.api<{ id: string; secret: string }>('PUT', '/admin/webhooks', { token: ada.token, body: { url: receiver.url, events: ['user.*'] } });
  t.equal(hook.status, 200);
  return { kiln, receiver, hook: hook.message, ada };
}

const uuid = '7f1c2a9e-3b4d-4c5e-8f60-718293a4b5c6';

async function emitUser(kiln: TestKiln, user: string) {
  await kiln.events.events.transaction(async (_tx, emit) => emit('user.create', { user, user_id: uuid }));
}

const deliveryOf = (kiln: TestKiln, user: string) =>
  eventually(`the delivery of user.create ${user}`, async () => {
    const [row] = await kiln.sql<{ id: string }[]>`
      select d.id from event_deliveries d join event_outbox e on e.id = d.event_id where e.body like ${`%"user":"${user}"%`}`;
    return row?.id;
  });

const statusOf = async (kiln: TestKiln, id: string) =>
  (await kiln.sql<{ status: string; attempts: number }[]>`select status, attempts from event_deliveries where id = ${id}`)[0]!;

t.test('a failing receiver gets 6 attempts on the schedule, the same delivery id and body, then the delivery is dead', async (t) => {
  const { kiln, receiver, hook } = await setup(t);
  receiver.mode = 500;
  await emitUser(kiln, 'bob');
  const id = await deliveryOf(kiln, 'bob');
  await eventually('dead-lettered', async () => ((await statusOf(kiln, id)).status === 'dead' ? true : undefined));
  const requests = receiver.requests.filter((r) => r.headers['x-service-delivery'] === id);
  t.equal(requests.length, 6, 'exactly 6 attempts');
  t.same(requests.map((r) => r.headers['x-service-attempt']), ['1', '2', '3', '4', '5', '6']);
  t.equal(new Set(requests.map((r) => r.body)).size, 1, 'the same bytes every time');
  for (const r of requests) {
    t.equal(r.headers['content-type'], 'application/json');
    t.equal(r.headers['x-service-event'], 'user.create');
    t.ok(verifySignature(hook.secret, r.body, r.headers['x-service-signature'] as string), 'signature verifies with the secret from create');
  }
  t.match(JSON.parse(requests[0]!.body), { event: 'user.create', at: /Z$/, content: { user: 'bob', user_id: uuid } });

  const attempts = await kiln.sql<{ attempt: number; started_at: Date; finished_at: Date; next_attempt_at: Date | null; response_status: number }[]>`
    select attempt, started_at, finished_at, next_attempt_at, response_status from event_delivery_attempts where delivery_id = ${id} order by attempt`;
  t.same(attempts.map((a) => a.response_status), [500, 500, 500, 500, 500, 500]);
  t.same(attempts.map((a) => (a.next_attempt_at ? a.next_attempt_at.getTime() - a.finished_at.getTime() : null)), [...SCALED, null],
    'attempt n+1 is scheduled the n-th wait after attempt n failed; none after the 6th');
  for (let i = 1; i < attempts.length; i++) {
    t.ok(attempts[i]!.started_at.getTime() >= attempts[i - 1]!.next_attempt_at!.getTime(), `attempt ${i + 1} did not start before it was due`);
  }
  const [row] = await kiln.sql<{ finished_at: Date | null; last_response_status: number; last_error: string }[]>`select finished_at, last_response_status, last_error from event_deliveries where id = ${id}`;
  t.ok(row!.finished_at, 'finished');
  t.same([row!.last_response_status, row!.last_error], [500, 'the receiver answered 500']);
});

t.test('a receiver that is down for a while gets the delivery when it returns', async (t) => {
  const { kiln, receiver } = await setup(t);
  await receiver.stop();
  await emitUser(kiln, 'carol');
  const id = await deliveryOf(kiln, 'carol');
  await eventually('two failed attempts', async () => ((await statusOf(kiln, id)).attempts >= 2 ? true : undefined));
  await receiver.start();
  await eventually('delivered', async () => ((await statusOf(kiln, id)).status === 'delivered' ? true : undefined));
  const attempts = await kiln.sql<{ error: string | null; response_status: number | null }[]>`
    select error, response_status from event_delivery_attempts where delivery_id = ${id} order by attempt`;
  t.match(attempts[0], { error: /ECONNREFUSED/, response_status: null }, 'a transport error is a failure');
  t.same(attempts.at(-1), { error: null, response_status: 200 });
  const received = receiver.requests.filter((r) => r.headers['x-service-delivery'] === id);
  t.equal(received.length, 1, 'one request reached it, with the id of the first attempt');
});

t.test('a rolled-back change delivers nothing', async (t) => {
  const { kiln, receiver } = await setup(t);
  await t.rejects(kiln.events.events.transaction(async (_tx, emit) => {
    emit('user.create', { user: 'ghost', user_id: uuid });
    throw new Error('rolled back');
  }));
  await emitUser(kiln, 'dave');
  await receiver.waitFor(1);
  const id = await deliveryOf(kiln, 'dave');
  await eventually('delivered', async () => ((await statusOf(kiln, id)).status === 'delivered' ? true : undefined));
  t.same(receiver.requests.map((r) => (JSON.parse(r.body) as { content: { user: string } }).content.user), ['dave'], 'only the committed event arrived');
  t.equal((await kiln.sql`select from event_outbox where body like '%ghost%'`).length, 0);
});

t.test('finished deliveries expire after retentionDays; unfinished ones and their events stay', async (t) => {
  const { kiln, receiver } = await setup(t);
  await emitUser(kiln, 'old');
  const old = await deliveryOf(kiln, 'old');
  await eventually('delivered', async () => ((await statusOf(kiln, old)).status === 'delivered' ? true : undefined));
  receiver.mode = 500;
  await emitUser(kiln, 'open');
  const open = await deliveryOf(kiln, 'open');
  await kiln.sql`update event_deliveries set finished_at = now() - interval '91 days' where id = ${old}`;
  // only this test's two events age (signing up emitted account events of its own)
  await kiln.sql`update event_outbox set created_at = now() - interval '91 days' where body like '%"user":"old"%' or body like '%"user":"open"%'`;
  const removed = await kiln.events.engine.expire();
  t.same(removed, { deliveries: 1, events: 1 }, 'the default retentionDays is 90');
  t.same((await kiln.sql<{ id: string }[]>`select id from event_deliveries`).map((r) => r.id), [open]);
  t.equal((await kiln.sql`select from event_outbox where body like '%"user":"open"%'`).length, 1, 'the open delivery keeps its event');
  t.equal((await kiln.sql`select from event_outbox where body like '%"user":"old"%'`).length, 0, 'the finished one\'s event is gone');
});
