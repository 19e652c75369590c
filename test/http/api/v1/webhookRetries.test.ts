import t from 'tap';
import { DELIVERY_QUEUE } from '../../../../storage/index.js';
import { signUp } from '../../../support/accounts.js';
import { steppedClock } from '../../../support/clock.js';
import { startReceiver } from '../../../support/events.js';
import { startTestKiln } from '../../../support/kiln.js';

// The webhook retry schedule of a real server with its production policy (spec http-api.md,
// Webhooks 3 and Limits: 6 attempts in total, backoff growing from 30 s to 8 min, then dead), on a
// clock that moves only when the test steps it. A retry's pg-boss job waits for the database's
// clock, so the server's clock starts a day ahead, where no job comes due while the test runs, and
// the test runs what is due on the server's clock with engine.attemptDue().

const DAY_MS = 86_400_000;
/** the waits after failed attempts 1 to 5 */
const WAITS_MS = [30_000, 60_000, 120_000, 240_000, 480_000];

interface Delivery {
  id: string;
  status: string;
  attempts: number;
  max_attempts: number;
  next_attempt_at: string | null;
  finished_at: string | null;
  attempt_log: { attempt: number; started_at: string; next_attempt_at: string | null; response_status: number | null }[];
}

t.test('a receiver that answers 500 gets 6 attempts, each its wait after the one before, then the delivery is dead', async (t) => {
  const clock = steppedClock(new Date(Date.now() + DAY_MS));
  const kiln = await startTestKiln(t, {}, { clock });
  const receiver = await startReceiver(t);
  receiver.mode = 500;
  const { token } = await signUp(kiln, 'ada');
  const hook = await kiln.api<{ id: string }>('PUT', '/admin/webhooks', { token, body: { url: receiver.url, events: ['webhook.ping'] } });
  t.equal(hook.status, 200);
  const webhookId = hook.message.id;

  const start = clock.now().getTime();
  const ping = await kiln.api<Delivery>('POST', `/admin/webhooks/${webhookId}/test`, { token });
  t.match(ping.message, { status: 'retrying', attempts: 1, max_attempts: 6 }, 'attempt 1 is sent at once and fails');
  const deliveryId = ping.message.id;
  const delivery = async () => (await kiln.api<Delivery>('GET', `/admin/webhooks/${webhookId}/deliveries/${deliveryId}`, { token })).message;
  const jobStart = async (attempt: number) => (await kiln.sql<{ start_after: Date }[]>`
    select start_after from pgboss.job where name = ${DELIVERY_QUEUE}
      and data @> ${kiln.sql.json({ due: [{ delivery: deliveryId, attempt }] })}`)[0]?.start_after.getTime();

  let failedAt = start;
  for (const [i, waitMs] of WAITS_MS.entries()) {
    const failed = i + 1;
    const next = failed + 1;
    const row = await delivery();
    t.match(row, { status: 'retrying', attempts: failed }, `attempt ${failed} failed`);
    t.equal(Date.parse(row.next_attempt_at!), failedAt + waitMs, `attempt ${next} is due ${waitMs / 1000} s after attempt ${failed}`);
    t.equal(await jobStart(next), failedAt + waitMs, `and its pg-boss job starts then`);

    clock.step(waitMs - 1);
    t.equal(await kiln.events.engine.attemptDue(), 0, `1 ms before, attempt ${next} does not run`);
    clock.step(1);
    t.equal(await kiln.events.engine.attemptDue(), 1, `once the wait is over, attempt ${next} runs`);
    failedAt = clock.now().getTime();
  }

  const dead = await delivery();
  t.match(dead, { status: 'dead', attempts: 6, next_attempt_at: null }, 'after the 6th failure the delivery is dead');
  t.ok(dead.finished_at, 'and finished');
  t.same(dead.attempt_log.map((a) => Date.parse(a.started_at) - start), [0, 30_000, 90_000, 210_000, 450_000, 930_000],
    'the attempts start 30 s, 1, 2, 4 and 8 min apart: 15.5 min from the first to the last');
  t.same(dead.attempt_log.map((a) => a.response_status), [500, 500, 500, 500, 500, 500]);
  t.equal(dead.attempt_log.at(-1)!.next_attempt_at, null, 'nothing is scheduled after the 6th');
  t.equal(await jobStart(7), undefined, 'no job for a 7th attempt');

  clock.step(DAY_MS);
  t.equal(await kiln.events.engine.attemptDue(), 0, 'a day later nothing is due');
  const sent = receiver.requests.filter((r) => r.headers['x-service-delivery'] === deliveryId);
  t.same(sent.map((r) => r.headers['x-service-attempt']), ['1', '2', '3', '4', '5', '6'], 'the receiver saw 6 attempts of the one delivery');
});
