// worker.queue_depth (services/builds/queueDepth.ts): the leader publishes the queued builds by
// system and the queued evaluations when they change, at most once a second. The reporter's clock
// is monotonic (performance.now; a deadline kept from the wall clock silenced the board after the
// wall clock was set back): the tests pass their own readings in milliseconds.
import { randomUUID } from 'node:crypto';
import t from 'tap';
import type { Sql } from 'postgres';
import { QueueDepthReporter } from '../../../services/builds/queueDepth.js';
import { testDatabase } from '../../support/db.js';
import { insertProject } from '../../support/modelRows.js';

async function queueBuild(sql: Sql, system: string): Promise<string> {
  const [drv] = await sql<{ id: string }[]>`
    insert into derivations (drv_path, name, system, outputs) values (${`/nix/store/${randomUUID().replaceAll('-', '')}-x.drv`}, 'x', ${system}, '{}') returning id`;
  const [build] = await sql<{ id: string }[]>`insert into derivation_builds (derivation_id, status) values (${drv!.id}, 'queued') returning id`;
  return build!.id;
}

t.test('publishes changes of the queue, at most once a second', async (t) => {
  const { sql } = await testDatabase(t);
  const projectId = await insertProject(sql, 'org', 'proj');
  const [task] = await sql<{ id: string }[]>`insert into tasks (project_id, name) values (${projectId}, 'default') returning id`;
  const published: unknown[] = [];
  let ms = 1_000_000;
  const clock = { now: () => ms, step: (by: number) => void (ms += by) };
  const reporter = new QueueDepthReporter(sql, { publish: (name, content) => published.push([name, content]) }, clock);

  await reporter.report();
  t.same(published, [['worker.queue_depth', { queued: 0, by_system: {} }]], 'the first report says what the queue is');

  const first = await queueBuild(sql, 'x86_64-linux');
  await queueBuild(sql, 'x86_64-linux');
  await queueBuild(sql, 'aarch64-linux');
  await sql`insert into evaluations (task_id, repository, wildcard, phase) values (${task!.id}, 'file:///nonexistent', '*', 'queued')`;
  await reporter.report();
  t.equal(published.length, 1, 'within the second: not even counted');

  clock.step(1000);
  await reporter.report();
  t.same(published[1], ['worker.queue_depth', { queued: 4, by_system: { 'x86_64-linux': 2, 'aarch64-linux': 1 } }]);

  clock.step(1000);
  await reporter.report();
  t.equal(published.length, 2, 'no change, no event');

  await sql`update derivation_builds set status = 'started' where id = ${first}`;
  clock.step(1000);
  await reporter.report();
  t.same(published[2], ['worker.queue_depth', { queued: 3, by_system: { 'x86_64-linux': 1, 'aarch64-linux': 1 } }]);
});

t.test('a count that takes long spaces the next ones out: at least 20 times its duration', async (t) => {
  const { sql } = await testDatabase(t);
  const published: unknown[] = [];
  // the clock's readings in turn: the reporter reads it before a count and after it
  const t0 = 1_000_000;
  const readings = [t0, t0 + 300, t0 + 5999, t0 + 6000, t0 + 6010];
  const clock = { now: () => readings.shift()! };
  const reporter = new QueueDepthReporter(sql, { publish: (name, content) => published.push([name, content]) }, clock);
  await reporter.report();
  t.equal(published.length, 1, 'the first count took 300 ms');
  await queueBuild(sql, 'x86_64-linux');
  await reporter.report();
  t.equal(published.length, 1, '5,999 ms after it began: not counted');
  await reporter.report();
  t.same(published[1], ['worker.queue_depth', { queued: 1, by_system: { 'x86_64-linux': 1 } }], '6,000 ms after: counted');
  t.equal(readings.length, 0, 'every reading used');
});

t.test('the pause after a count is at most 60 s', async (t) => {
  const { sql } = await testDatabase(t);
  const published: unknown[] = [];
  const t0 = 1_000_000;
  // a count of 10 s (20 × would be 200 s), then a count of no time
  const readings = [t0, t0 + 10_000, t0 + 59_999, t0 + 60_000, t0 + 60_000, t0 + 60_999, t0 + 61_000, t0 + 61_000];
  const clock = { now: () => readings.shift()! };
  const reporter = new QueueDepthReporter(sql, { publish: (name, content) => published.push([name, content]) }, clock);
  await reporter.report();
  t.equal(published.length, 1, 'the first count took 10 s');
  await queueBuild(sql, 'x86_64-linux');
  await reporter.report();
  t.equal(published.length, 1, '59,999 ms after it began: not counted');
  await reporter.report();
  t.equal(published.length, 2, '60,000 ms after: counted, not 200 s after');
  await queueBuild(sql, 'x86_64-linux');
  await reporter.report();
  t.equal(published.length, 2, 'within the second after that count: not counted');
  await reporter.report();
  t.same(published[2], ['worker.queue_depth', { queued: 2, by_system: { 'x86_64-linux': 2 } }], 'a second after: counted');
  t.equal(readings.length, 0, 'every reading used');
});

t.test('the pause is not read from the wall clock: a wall clock set back an hour leaves the board counting', async (t) => {
  const { sql } = await testDatabase(t);
  const published: unknown[] = [];
  const t0 = 1_000_000;
  const readings = [t0, t0 + 10, t0 + 1_000, t0 + 1_010];
  const reporter = new QueueDepthReporter(sql, { publish: (name, content) => published.push([name, content]) }, { now: () => readings.shift()! });
  const wallNow = Date.now;
  t.teardown(() => { Date.now = wallNow; });
  await reporter.report();
  Date.now = () => wallNow() - 3_600_000;
  await queueBuild(sql, 'x86_64-linux');
  await reporter.report();
  t.same(published[1], ['worker.queue_depth', { queued: 1, by_system: { 'x86_64-linux': 1 } }], 'a second later on its own clock: counted');
  t.equal(readings.length, 0, 'every reading used');
});
