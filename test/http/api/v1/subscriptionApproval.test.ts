// Spec, "Other transitions": approving a subscription request re-queues the evaluations parked for
// want of a cache. End to end: a real server whose scheduler's periodic pass is held (it would
// release the evaluation within a second and hide a missing re-queue), a protocol-level worker, and
// the approval through POST /caches/{cache}/subscription-requests/{id}/approve.
import t from 'tap';
import type { SchedulerTicker } from '../../../../services/index.js';
import { signUp } from '../../../support/accounts.js';
import { startTestKiln } from '../../../support/kiln.js';
import { handshake, testHello } from '../../../support/protoClient.js';

/** A periodic pass that never comes: only the events themselves wake the scheduler. */
const heldTicker: SchedulerTicker = { start: () => () => undefined };

/** `promise`, or a failure naming what did not happen within `ms` (a bound, not a timing check). */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms)));
  return Promise.race([promise, bound]).finally(() => clearTimeout(timer));
}

t.test('approving a subscription request re-queues the evaluation parked for want of a cache', async (t) => {
  const kiln = await startTestKiln(t, { localWorker: true }, { schedulerTicker: heldTicker });
  await signUp(kiln, 'root'); // the first account is the superuser; the others are not
  const ada = await signUp(kiln, 'ada');
  const cat = await signUp(kiln, 'cat');
  t.equal((await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } })).status, 200);
  t.equal((await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'app', repository: 'file:///nonexistent', wildcard: 'packages.x86_64-linux.*' } })).status, 200);
  t.equal((await kiln.api('PUT', '/caches', { token: cat.token, body: { name: 'shared', public: true } })).status, 200);
  const [project] = await kiln.sql<{ id: string }[]>`select id from projects where name = 'app'`;
  const worker = await handshake(`ws://127.0.0.1:${kiln.port}/proto`, testHello());
  t.teardown(() => worker.close());
  await worker.next('welcome');

  const phases: string[] = [];
  let parked!: () => void;
  const waiting = new Promise<void>((resolve) => (parked = resolve));
  kiln.events.bus.subscribe((event) => {
    if (!event.event.startsWith('evaluation.')) return;
    phases.push(event.event);
    if (event.event === 'evaluation.waiting') parked();
  });
  const commit = 'c'.repeat(40);
  const evaluated = await kiln.api<string>('POST', `/tasks/${project!.id}/default/evaluate`, { token: ada.token, body: { commit } });
  t.equal(evaluated.status, 200, String(evaluated.message));
  await within(waiting, 30_000, 'evaluation.waiting');
  const phase = async () => (await kiln.api<{ phase: string }>('GET', `/evals/${evaluated.message}`, { token: ada.token })).message.phase;
  t.equal(await phase(), 'waiting', 'parked: the project has no writable cache');

  // ada may not subscribe her project to cat's cache outright: the subscription is a request.
  const asked = await kiln.api('POST', '/projects/app/subscribe/shared', { token: ada.token, body: { mode: 0 } });
  t.same([asked.status, asked.message], [200, 'Subscription requested']);
  t.equal(await phase(), 'waiting', 'a request alone releases nothing');
  const [request] = (await kiln.api<{ id: string }[]>('GET', '/caches/shared/subscription-requests', { token: cat.token })).message;
  const approved = await kiln.api('POST', `/caches/shared/subscription-requests/${request!.id}/approve`, { token: cat.token });
  t.same([approved.status, approved.message], [200, 'Subscribed']);

  const job = await within(worker.next('evalJob'), 30_000, 'the evalJob after the approval');
  t.equal(job.commit, commit, 'the parked evaluation is dispatched');
  t.equal(await phase(), 'evaluating');
  t.match(phases, ['evaluation.queued', 'evaluation.waiting', 'evaluation.queued', 'evaluation.evaluating']);
});
