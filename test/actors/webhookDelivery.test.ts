import t from 'tap';
import { createActor } from 'xstate';
import {
  DELIVERY_ATTEMPTS,
  RETRY_DELAYS_MS,
  createWebhookDeliveryMachine,
  decideDelivery,
  defaultDeliveryPolicy,
  type DeliveryInput,
  type DeliveryRecord,
  type SendResult,
} from '../../actors/index.js';

const input = (attempt: number): DeliveryInput => ({
  deliveryId: '7f1c2a9e-3b4d-4c5e-8f60-718293a4b5c6',
  attempt,
  maxAttempts: DELIVERY_ATTEMPTS,
  event: 'project.create',
  target: 'webhook',
  request: { kind: 'web', url: 'http://127.0.0.1:9/hook', body: '{}', headers: {} },
  startedAt: 0,
});

t.test('the documented schedule: 6 attempts, waits of 30 s, 1, 2, 4 and 8 min, then dead', async (t) => {
  t.equal(DELIVERY_ATTEMPTS, 6);
  t.same(RETRY_DELAYS_MS, [30_000, 60_000, 120_000, 240_000, 480_000]);
  // An injected clock: every attempt fails at t, the next one is due at t + wait.
  let clock = Date.UTC(2026, 0, 1);
  const due: number[] = [];
  let verdict = '';
  for (let attempt = 1; attempt <= 6; attempt++) {
    const decision = decideDelivery(defaultDeliveryPolicy, input(attempt), { ok: false, status: 500, finishedAt: clock });
    verdict = decision.status;
    if (decision.nextAttemptAt !== null) {
      due.push(decision.nextAttemptAt - clock);
      clock = decision.nextAttemptAt + 250; // the next attempt takes 250 ms
    }
  }
  t.same(due, [30_000, 60_000, 120_000, 240_000, 480_000], 'waits after attempts 1 to 5');
  t.equal(verdict, 'dead', 'the 6th failure dead-letters the delivery');
  t.same(decideDelivery(defaultDeliveryPolicy, input(3), { ok: true, status: 204, finishedAt: 5 }), { status: 'delivered', nextAttemptAt: null });
});

async function run(results: (SendResult | Error)[], attempt: number, recordFails = false) {
  const records: DeliveryRecord[] = [];
  const sent: unknown[] = [];
  let now = 1_000;
  const machine = createWebhookDeliveryMachine({
    now: () => now++,
    send: async (request) => {
      sent.push(request);
      const next = results.shift()!;
      if (next instanceof Error) throw next;
      return next;
    },
    record: async (record) => {
      if (recordFails) throw new Error('database away');
      records.push(record);
    },
  }, defaultDeliveryPolicy);
  const actor = createActor(machine, { input: input(attempt) });
  const errors: unknown[] = [];
  const settled = new Promise<void>((resolve) => {
    actor.subscribe({
      next: (s) => {
        if (s.status !== 'active') resolve();
      },
      error: (e) => {
        errors.push(e);
        resolve();
      },
    });
  });
  actor.start();
  await settled;
  const snapshot = actor.getSnapshot();
  return { snapshot, records, sent, errors };
}

t.test('an attempt that succeeds is recorded as delivered', async (t) => {
  const { snapshot, records, sent } = await run([{ ok: true, status: 200, excerpt: 'ok' }], 1);
  t.equal(snapshot.value, 'delivered');
  t.same(snapshot.output, { status: 'delivered', nextAttemptAt: null });
  t.equal(sent.length, 1);
  t.match(records[0], { outcome: { ok: true, status: 200 }, decision: { status: 'delivered' } });
});

t.test('a transport error is a failure and schedules the next attempt', async (t) => {
  const { snapshot, records } = await run([new Error('ECONNREFUSED')], 2);
  t.equal(snapshot.value, 'retrying');
  t.match(records[0], { outcome: { ok: false, error: 'ECONNREFUSED' }, decision: { status: 'retrying' } });
  t.equal(records[0]!.decision.nextAttemptAt! - records[0]!.outcome.finishedAt, 60_000, 'after attempt 2: one minute');
});

t.test('the last attempt failing dead-letters', async (t) => {
  const { snapshot } = await run([{ ok: false, status: 503 }], 6);
  t.equal(snapshot.value, 'dead');
});

t.test('a record that cannot be written crashes the actor (its supervisor restarts it from the row)', async (t) => {
  const { snapshot, errors } = await run([{ ok: true, status: 200 }], 1, true);
  t.equal(snapshot.status, 'error');
  t.match(errors[0], { message: 'database away' });
});
