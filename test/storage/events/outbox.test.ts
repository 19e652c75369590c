import t, { type Test } from 'tap';
import pino from 'pino';
import postgres, { type Sql } from 'postgres';
import { DELIVERY_QUEUE, createEvents, ensureDeliveryQueue, memoryEventBus, startQueue, stopQueue, type BusEvent } from '../../../storage/index.js';
import { testDatabase } from '../../support/db.js';

const log = pino({ level: 'silent' });

/** An organization, projects P and Q, a task of P, a cache, and webhooks and task actions on them. */
async function seed(sql: Sql) {
  const [org] = await sql<{ id: string }[]>`insert into organizations (name, ssh_public_key, ssh_private_key) values ('acme', 'ssh-ed25519 AAAA', '\\x00') returning id`;
  const [p] = await sql<{ id: string }[]>`insert into projects (organization_id, name, repository) values (${org!.id}, 'web', 'https://git.example/web') returning id`;
  const [q] = await sql<{ id: string }[]>`insert into projects (organization_id, name, repository) values (${org!.id}, 'api', 'https://git.example/api') returning id`;
  const [task] = await sql<{ id: string }[]>`insert into tasks (project_id, name) values (${p!.id}, 'default') returning id`;
  const [cache] = await sql<{ id: string }[]>`insert into caches (name, key_name, public_key, secret_key) values ('main', 'k-1', ${Buffer.alloc(32)}, '\\x00') returning id`;
  const hook = async (name: string, projectId: string | null, cacheId: string | null, events: string[], active = true) => {
    const [row] = await sql<{ id: string }[]>`
      insert into webhooks (project_id, cache_id, url, events, secret, active, description)
      values (${projectId}, ${cacheId}, 'http://127.0.0.1:9/hook', ${events}, '\\x00', ${active}, ${name}) returning id`;
    return row!.id;
  };
  const action = async (name: string, events: string[]) => {
    const [row] = await sql<{ id: string }[]>`
      insert into task_actions (task_id, name, kind, events, mail_to) values (${task!.id}, ${name}, 'send_mail', ${events}, ${['ops@example.test']}) returning id`;
    return row!.id;
  };
  return {
    projectP: p!.id, projectQ: q!.id, task: task!.id, cache: cache!.id,
    hooks: {
      instance: await hook('instance', null, null, []),
      pProjects: await hook('p-projects', p!.id, null, ['project.*']),
      pBuilds: await hook('p-builds', p!.id, null, ['build.*']),
      cache: await hook('cache', null, cache!.id, []),
      q: await hook('q', q!.id, null, []),
      disabled: await hook('disabled', null, null, [], false),
    },
    actions: { all: await action('all', []), builds: await action('builds', ['build.*']) },
  };
}

async function setup(t: Test) {
  const { url, sql } = await testDatabase(t);
  const boss = await startQueue(url, log, { maxConnections: 2 });
  t.teardown(() => stopQueue(boss, { timeoutMs: 2000 }));
  await ensureDeliveryQueue(boss);
  const bus = await memoryEventBus(log);
  const published: BusEvent[] = [];
  bus.subscribe((e) => published.push(e));
  let now = Date.UTC(2026, 0, 1, 12);
  const events = createEvents({ sql, bus, boss, now: () => now++ });
  const jobs = async () => (await sql<{ n: number }[]>`select count(*)::int as n from pgboss.job where name = ${DELIVERY_QUEUE}`)[0]!.n;
  return { url, sql, events, published, jobs, seeded: await seed(sql) };
}

const uuid = '7f1c2a9e-3b4d-4c5e-8f60-718293a4b5c6';

t.test('a transaction writes durable events and one delivery per matching webhook and task action', async (t) => {
  const { sql, events, published, jobs, seeded } = await setup(t);
  const build = (entry: boolean) => ({ build_id: uuid, derivation_build: uuid, evaluation_id: uuid, status: 'queued' as const, task: 'default', project: 'acme/web', entry_point: entry });
  const p = { projectId: seeded.projectP };
  const result = await events.transaction(async (tx, emit) => {
    await tx`update projects set description = 'changed' where id = ${seeded.projectP}`;
    emit('project.create', { project: 'acme/web', project_id: seeded.projectP }, p);
    emit('cache.nar.upload', { cache: 'main', store_path: '/nix/store/abc-x', nar_hash: 'sha256:x', nar_size: 10 }, { cacheId: seeded.cache });
    emit('login.success', { user: 'ada', user_id: uuid, method: 'password' }, { ...p, userId: uuid });
    emit('build.queued', build(false), { ...p, taskId: seeded.task });
    emit('build.queued', build(true), { ...p, taskId: seeded.task });
    emit('worker.connected', { worker: uuid });
    return 'done';
  });
  t.equal(result, 'done', 'the function’s value comes back');

  const outbox = await sql<{ id: string; event: string; body: string }[]>`select id, event, body from event_outbox order by event, created_at`;
  t.same(outbox.map((r) => r.event), ['build.queued', 'cache.nar.upload', 'login.success', 'project.create'], 'durable events only: not the inner build, not worker.connected');
  t.match(JSON.parse(outbox.find((r) => r.event === 'build.queued')!.body), { event: 'build.queued', at: /^2026-01-01T12:00:00\.\d{3}Z$/, content: { entry_point: true } });

  const deliveries = await sql<{ event: string; target: string }[]>`
    select e.event, coalesce(w.description, a.name) as target
    from event_deliveries d join event_outbox e on e.id = d.event_id
    left join webhooks w on w.id = d.webhook_id left join task_actions a on a.id = d.task_action_id
    order by e.event, target`;
  t.same(deliveries.map((d) => `${d.event} → ${d.target}`), [
    'build.queued → all',
    'build.queued → builds',
    'build.queued → instance',
    'build.queued → p-builds',
    'cache.nar.upload → cache',
    'cache.nar.upload → instance',
    'login.success → instance',
    'project.create → instance',
    'project.create → p-projects',
  ], 'scope, globs and audience decide; project Q’s and the disabled webhook get nothing; account activity reaches instance webhooks only');
  t.equal(await jobs(), 1, 'one pg-boss job carrying the 9 attempts, in the same transaction');
  const statuses = await sql<{ status: string; attempts: number }[]>`select distinct status, attempts from event_deliveries`;
  t.same(statuses, [{ status: 'pending', attempts: 0 }]);

  t.same(published.map((e) => e.event), ['project.create', 'cache.nar.upload', 'login.success', 'build.queued', 'build.queued', 'worker.connected'], 'every event goes on the bus after the commit, in order');
  t.equal(published[0]!.frame, outbox.find((r) => r.event === 'project.create')!.body, 'the frame is the stored body');
});

t.test('a rollback emits nothing', async (t) => {
  const { sql, events, published, jobs, seeded } = await setup(t);
  await t.rejects(events.transaction(async (tx, emit) => {
    emit('project.create', { project: 'acme/web', project_id: seeded.projectP }, { projectId: seeded.projectP });
    await tx`update projects set description = 'never' where id = ${seeded.projectP}`;
    throw new Error('changed my mind');
  }), /changed my mind/);
  await t.rejects(events.transaction(async (_tx, emit) => {
    emit('project.create', { project: 'acme/web', project_id: 'not-a-uuid' });
  }), /cannot emit project.create: content.project_id/, 'a bad content throws inside the transaction');
  t.equal((await sql`select from event_outbox`).length, 0);
  t.equal((await sql`select from event_deliveries`).length, 0);
  t.equal(await jobs(), 0);
  t.equal(published.length, 0, 'nothing on the bus');
  t.equal((await sql<{ description: string }[]>`select description from projects where id = ${seeded.projectP}`)[0]!.description, '');
});

t.test('live-only events go to the bus alone; durable ones must be in a transaction', async (t) => {
  const { sql, events, published } = await setup(t);
  events.publish('build.progress', { build_id: uuid, derivation_build: uuid, evaluation_id: uuid, status: 'started', task: 'default', project: 'acme/web', phase: 'uploading', bytes: 10, paths: 1 }, { buildId: uuid });
  t.same(published.map((e) => [e.event, e.scope]), [['build.progress', { buildId: uuid }]]);
  t.throws(() => events.publish('project.delete', { project: 'acme/web', project_id: uuid }), /durable here: emit it inside events.transaction/);
  t.equal((await sql`select from event_outbox`).length, 0);
});

t.test('emit(tx, …) inside a transaction the caller opened, published with afterCommit()', async (t) => {
  const { sql, events, published, seeded } = await setup(t);
  const woken: number[] = [];
  events.onDeliveriesQueued(() => woken.push(1));
  const emitted = await sql.begin(async (tx) => [
    await events.emit(tx, 'task.star', { project: 'acme/web', task: 'default', user: 'ada' }, { projectId: seeded.projectP, taskId: seeded.task }),
    await events.emit(tx, 'task.action.update', {
      project: 'acme/web', task: 'default', action_id: seeded.actions.all, action: 'all', kind: 'send_mail', status: 'delivered', delivery_id: uuid, event: 'task.star', attempt: 1,
    }, { projectId: seeded.projectP, taskId: seeded.task }),
  ]);
  t.equal(published.length, 0, 'nothing published before afterCommit');
  events.afterCommit(emitted);
  t.same(published.map((e) => e.event), ['task.star', 'task.action.update']);
  t.equal(woken.length, 1, 'the local delivery worker is woken');
  const targets = await sql<{ event: string; target: string }[]>`
    select e.event, coalesce(w.description, a.name) as target from event_deliveries d join event_outbox e on e.id = d.event_id
    left join webhooks w on w.id = d.webhook_id left join task_actions a on a.id = d.task_action_id order by 1, 2`;
  t.same(targets.map((d) => `${d.event} → ${d.target}`), ['task.action.update → instance', 'task.star → all', 'task.star → instance'],
    'a task action’s own reports never go to task actions (no loop)');
});

t.test('the outbox insert is one statement whatever the number of events, with each event\'s scope', async (t) => {
  const { url, events, seeded } = await setup(t);
  // one connection, so its prepared statements are all of them (pg_prepared_statements is per session)
  const one = postgres(url, { max: 1, onnotice: () => undefined });
  t.teardown(() => one.end({ timeout: 5 }));
  const onOne = events.withPool(one);
  for (const count of [1, 2, 3]) {
    await onOne.transaction(async (_tx, emit) => {
      for (let i = 0; i < count; i++) emit('task.star', { project: 'acme/web', task: 'default', user: `u${count}-${i}` }, { projectId: seeded.projectP, taskId: seeded.task });
    });
  }
  await onOne.transaction(async (_tx, emit) => emit('login.success', { user: 'ada', user_id: uuid, method: 'password' }, { userId: uuid }));
  const statements = await one<{ statement: string }[]>`select statement from pg_prepared_statements where statement like ${'%insert into event_outbox%'}`;
  t.equal(statements.length, 1, 'batches of 1, 2, 3 and 1 events: one prepared insert (a VALUES list was one per count)');
  const rows = await one<{ event: string; organization_id: string | null; project_id: string | null; task_id: string | null; user_id: string | null; cache_id: string | null }[]>`
    select event, organization_id, project_id, task_id, user_id, cache_id from event_outbox order by created_at, event`;
  t.equal(rows.length, 7);
  t.same(rows.filter((r) => r.event === 'task.star').map((r) => [r.project_id, r.task_id, r.user_id, r.cache_id]),
    Array.from({ length: 6 }, () => [seeded.projectP, seeded.task, null, null]), 'each row\'s scope columns, unset ones null');
  t.same(rows.filter((r) => r.event === 'login.success').map((r) => [r.project_id, r.user_id]), [[null, uuid]]);
});
