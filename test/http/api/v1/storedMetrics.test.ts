// The stored series besides cache traffic (docs/metrics.md, "Stored metrics") on a running kiln:
// a worker's samples (who may read which: superusers all; manageWorkers on a project the worker
// connected for, that connection's samples only; a project that merely registered the worker's id,
// or a worker posing under the same id for another project, nothing of the other's), the instance
// window (one row per interval whichever process writes first, retention at the boundary,
// superusers only), the job phase rollups (exact sums, superusers only) and a project's evaluation
// and build series (exact counts per period).
import t from 'tap';
import { randomUUID } from 'node:crypto';
import { startTestKiln } from '../../../support/kiln.js';
import { signUp } from '../../../support/accounts.js';
import { addPhaseSamples } from '../../../../storage/index.js';

interface Samples { worker: string; truncated: boolean; samples: { sampled_at: string; load1: number; builds_running: number; store_free_bytes: number | null }[] }

const DAY = 86_400_000;

t.test('stored series', async (t) => {
  // upkeep by hand only: the instance window's loop would otherwise take this interval's row before the test's own call does (seen under load)
  const kiln = await startTestKiln(t, { 'metrics.retention.rawDays': 7 }, { upkeepTimers: false });
  const root = await signUp(kiln, 'root'); // the first account is the superuser
  const ada = await signUp(kiln, 'ada');
  const vic = await signUp(kiln, 'vic');
  const eve = await signUp(kiln, 'eve');
  await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } });
  await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'web', repository: 'file:///x' } });
  await kiln.api('POST', '/orgs/acme/users', { token: ada.token, body: { user: 'vic', role: 'View' } });
  await kiln.api('PUT', '/orgs', { token: eve.token, body: { name: 'evil' } });
  await kiln.api('PUT', '/projects/evil', { token: eve.token, body: { name: 'lair', repository: 'file:///x' } });
  const [web] = await kiln.sql<{ id: string }[]>`select id from projects where name = 'web'`;
  const [lair] = await kiln.sql<{ id: string }[]>`select id from projects where name = 'lair'`;

  // One worker id, two connections: the real worker for acme/web, then an impostor for evil/lair;
  // eve also registered the id in her project. A sample of each connection, and one from before
  // samples named their connection.
  const workerId = randomUUID();
  const hello = kiln.sql.json({ workerId, maxConcurrentBuilds: 4, maxConcurrentEvals: 1 });
  const [real] = await kiln.sql<{ id: string }[]>`
    insert into worker_connections (worker_id, hello, projects, disconnected_at) values (${workerId}, ${hello}, ${[web!.id]}::uuid[], now()) returning id`;
  const [fake] = await kiln.sql<{ id: string }[]>`
    insert into worker_connections (worker_id, hello, projects, disconnected_at) values (${workerId}, ${hello}, ${[lair!.id]}::uuid[], now()) returning id`;
  await kiln.sql`insert into worker_registrations (project_id, worker_id, token_hash) values (${lair!.id}, ${workerId}, 'x')`;
  const now = Date.now();
  const sample = (connectionId: string | null, ago: number, load: number) => kiln.sql`
    insert into worker_samples (worker_id, connection_id, sampled_at, load1, memory_free_bytes, memory_total_bytes, store_free_bytes, build_slots, builds_running, eval_slots, evals_running)
    values (${workerId}, ${connectionId}, ${new Date(now - ago)}, ${load}, 1, 2, null, 4, 1, 1, 0)`;
  await sample(real!.id, 3_600_000, 1.5);
  await sample(fake!.id, 1_800_000, 9);
  await sample(null, 7_200_000, 3);
  const read = (token: string | undefined, query = '') => kiln.api<Samples>('GET', `/workers/${workerId}/samples${query}`, token === undefined ? {} : { token });

  t.test('worker samples: each caller sees what its projects\' connections sent', async (t) => {
    const owner = await read(ada.token);
    t.equal(owner.status, 200, JSON.stringify(owner.message));
    t.same(owner.message.samples.map((s) => s.load1), [1.5], 'acme/web\'s admin: the real connection\'s sample only');
    t.same(owner.message.samples[0], { sampled_at: new Date(now - 3_600_000).toISOString(), load1: 1.5, memory_free_bytes: 1, memory_total_bytes: 2, store_free_bytes: null, build_slots: 4, builds_running: 1, eval_slots: 1, evals_running: 0 });
    t.same((await read(eve.token)).message.samples.map((s) => s.load1), [9], 'the impostor\'s project: its own connection only, not the real worker\'s, though it registered the id');
    t.same((await read(root.token)).message.samples.map((s) => s.load1), [3, 1.5, 9], 'a superuser: every sample, oldest first');
    const viewer = await read(vic.token);
    t.same([viewer.status, viewer.code], [403, 'forbidden'], 'a viewer of web lacks manageWorkers');
    t.match(viewer.message, 'manageWorkers');
    const stranger = await signUp(kiln, 'sam');
    t.same([(await read(stranger.token)).status, (await read(stranger.token)).code], [404, 'not_found'], 'no project in sight: as if there were no worker');
    t.equal((await read(undefined)).status, 401);
    t.equal((await kiln.api('GET', `/workers/${randomUUID()}/samples`, { token: ada.token })).status, 404, 'an unknown worker');
    t.equal((await kiln.api('GET', '/workers/not-a-uuid/samples', { token: ada.token })).status, 404);
    t.equal((await kiln.api('GET', '/workers/not-a-uuid/samples', { token: root.token })).status, 404, 'a superuser too');
    const windowed = await read(root.token, `?from=${new Date(now - 5_400_000).toISOString()}&to=${new Date(now - 1_000_000).toISOString()}`);
    t.same(windowed.message.samples.map((s) => s.load1), [1.5, 9], 'from inclusive, to exclusive');
  });

  t.test('malformed windows are 400 naming the parameter', async (t) => {
    for (const [query, field] of [['from=yesterday', 'from'], ['from=2026-11-26T00:00:00Z&to=2026-11-25T00:00:00Z', 'from'],
      ['from=2020-01-01T00:00:00Z', 'from'], ['bogus=1', 'bogus'], [`to=${'9'.repeat(100)}`, 'to']] as const) {
      const res = await kiln.api<string>('GET', `/workers/${workerId}/samples?${query}`, { token: ada.token });
      t.same([res.status, res.code], [400, 'invalid_query'], query);
      t.match(res.message, field, query);
      t.equal((await kiln.api('GET', `/metrics/instance?${query}`, { token: root.token })).status, 400, `instance: ${query}`);
      t.equal((await kiln.api('GET', `/projects/acme/web/metrics?${query}`, { token: ada.token })).status, 400, `project: ${query}`);
    }
    t.equal((await kiln.api('GET', '/projects/acme/web/metrics?period=week', { token: ada.token })).status, 400);
  });

  t.test('the instance window: one row per interval, superusers only, raw retention', async (t) => {
    await kiln.sql`insert into worker_connections (worker_id, hello, projects) values (${randomUUID()}, ${kiln.sql.json({ maxConcurrentBuilds: 6, maxConcurrentEvals: 2 })}, '{}')`;
    const first = await kiln.upkeep.instanceSample();
    t.equal(first.sampled, 1);
    t.equal((await kiln.upkeep.instanceSample()).sampled, 0, 'the same interval again (another process): nothing written');
    const [row] = await kiln.sql<{ workers_connected: number; build_slots: number; eval_slots: number }[]>`select * from instance_samples`;
    t.match(row, { workers_connected: 1, build_slots: 6, eval_slots: 2 }, 'open connections of every process, their slots summed');
    const res = await kiln.api<{ samples: { workers_connected: number }[] }>('GET', '/metrics/instance', { token: root.token });
    t.equal(res.status, 200);
    t.same(res.message.samples.map((s) => s.workers_connected), [1]);
    t.same([(await kiln.api('GET', '/metrics/instance', { token: ada.token })).status, (await kiln.api('GET', '/metrics/instance')).status], [403, 401]);

    const [latest] = await kiln.sql<{ at: Date }[]>`select max(sampled_at) as at from instance_samples`;
    const cols = '0, 0, 0, 0, 0, 0, 0, 0';
    await kiln.sql.unsafe(`insert into instance_samples values ('${new Date(latest!.at.getTime() - 7 * DAY - 60_000).toISOString()}', ${cols}), ('${new Date(latest!.at.getTime() - 7 * DAY + 60_000).toISOString()}', ${cols})`);
    // The pass's cutoff is rawDays before the clock's now, which is at or after the latest row.
    const pass = await kiln.upkeep.instanceSample();
    t.ok(pass.deleted === 1 || pass.deleted === 2, 'the row past rawDays went');
    t.equal((await kiln.sql`select 1 from instance_samples where sampled_at < ${new Date(latest!.at.getTime() - 7 * DAY)}`).length, 0);

    // Slots are what workers claim: two claims past int range must not make every pass fail.
    const greedy = kiln.sql.json({ maxConcurrentBuilds: 2_000_000_000, maxConcurrentEvals: 2_000_000_000 });
    await kiln.sql`insert into worker_connections (worker_id, hello, projects) values (${randomUUID()}, ${greedy}, '{}'), (${randomUUID()}, ${greedy}, '{}')`;
    await kiln.sql`delete from instance_samples`;
    t.equal((await kiln.upkeep.instanceSample()).sampled, 1, 'a pass with absurd claims still writes its row');
    const [capped] = await kiln.sql<{ build_slots: number }[]>`select build_slots from instance_samples`;
    t.equal(capped!.build_slots, 2147483647, 'the sum is capped at the column\'s range');
  });

  t.test('worker and instance rollups: read by the rules of their raw rows', async (t) => {
    await kiln.upkeep.metricRollup();
    type Rollups = { worker?: string; period: string; points: { start: string; metric: string; samples: number; avg: number; min: number; max: number }[] };
    const rollups = (token: string | null, worker: string = workerId) => kiln.api<Rollups>('GET', `/workers/${worker}/rollups?period=week`, token === null ? {} : { token });
    /** load1 over the answer's weeks: samples, least, largest. */
    const load = (res: { message: Rollups }) => {
      const points = res.message.points.filter((p) => p.metric === 'load1');
      return [points.reduce((n, p) => n + p.samples, 0), Math.min(...points.map((p) => p.min)), Math.max(...points.map((p) => p.max))];
    };
    const all = await rollups(root.token);
    t.equal(all.status, 200, JSON.stringify(all.message));
    t.same(load(all), [3, 1.5, 9], 'a superuser: every connection');
    t.same(load(await rollups(ada.token)), [1, 1.5, 1.5], 'acme/web\'s admin: the real connection only');
    t.same(load(await rollups(eve.token)), [1, 9, 9], 'the impostor\'s project: its own connection only');
    t.same([(await rollups(vic.token)).status, (await rollups(null)).status, (await rollups(ada.token, randomUUID())).status], [403, 401, 404]);
    const instance = (token: string | null) => kiln.api<Rollups>('GET', '/metrics/instance/rollups?period=minute', token === null ? {} : { token });
    const rows = await instance(root.token);
    t.equal(rows.status, 200);
    t.ok(rows.message.points.some((p) => p.metric === 'workers_connected'), 'the instance window\'s rows rolled up');
    t.same([(await instance(ada.token)).status, (await instance(null)).status], [403, 401]);
  });

  t.test('job phase rollups: exact sums per period, superusers only', async (t) => {
    // Samples of the last hour's first minutes: two build dispatches, one evaluation run.
    const hour = Math.floor(Date.now() / 3_600_000) * 3_600_000 - 3_600_000;
    await addPhaseSamples(kiln.sql, [
      { kind: 'build', phase: 'dispatch', endedAt: new Date(hour + 10_000), durationMs: 1500 },
      { kind: 'build', phase: 'dispatch', endedAt: new Date(hour + 70_000), durationMs: 4500 },
      { kind: 'evaluation', phase: 'run', endedAt: new Date(hour + 20_000), durationMs: 30_000 },
    ]);
    await kiln.upkeep.metricRollup();
    type Phases = { period: string; points: { start: string; kind: string; phase: string; samples: number; seconds_avg: number; seconds_max: number }[] };
    const read = (query: string, token: string | null = root.token) => kiln.api<Phases>('GET', `/metrics/phases?${query}`, token === null ? {} : { token });
    const minutes = await read(`period=minute&from=${new Date(hour).toISOString()}&to=${new Date(hour + 3_600_000).toISOString()}`);
    t.equal(minutes.status, 200);
    t.same(minutes.message.points.map((p) => [p.start, p.kind, p.phase, p.samples, p.seconds_avg, p.seconds_max]), [
      [new Date(hour).toISOString(), 'build', 'dispatch', 1, 1.5, 1.5],
      [new Date(hour).toISOString(), 'evaluation', 'run', 1, 30, 30],
      [new Date(hour + 60_000).toISOString(), 'build', 'dispatch', 1, 4.5, 4.5],
    ]);
    const hours = await read('period=hour');
    t.same(hours.message.points.filter((p) => p.start === new Date(hour).toISOString()).map((p) => [p.kind, p.phase, p.samples, p.seconds_avg, p.seconds_max]),
      [['build', 'dispatch', 2, 3, 4.5], ['evaluation', 'run', 1, 30, 30]], 'the hour: counts summed, the mean of the sums, the largest');
    t.equal(hours.message.period, 'hour');
    t.same([(await read('', ada.token)).status, (await read('', null)).status], [403, 401]);
    for (const [query, field] of [['period=second', 'period'], ['period=minute&from=2020-01-01T00:00:00Z', 'from'], ['bogus=1', 'bogus']] as const) {
      const res = await kiln.api<string>('GET', `/metrics/phases?${query}`, { token: root.token });
      t.same([res.status, res.code], [400, 'invalid_query'], query);
      t.match(res.message, field, query);
    }
  });

  t.test('a project\'s evaluations and builds per period, for those who may see it', async (t) => {
    const [task] = await kiln.sql<{ id: string }[]>`insert into tasks (project_id, name) values (${web!.id}, 'ci') returning id`;
    const hour = Math.floor(now / 3_600_000) * 3_600_000 - 2 * 3_600_000;
    const at = (ms: number) => new Date(hour + ms);
    const evaluation = async (phase: string, createdMs: number, durationMs: number | null) => (await kiln.sql<{ id: string }[]>`
      insert into evaluations (task_id, repository, wildcard, phase, created_at, eval_duration_ms) values (${task!.id}, 'file:///x', '*', ${phase}, ${at(createdMs)}, ${durationMs}) returning id`)[0]!.id;
    const e1 = await evaluation('completed', 60_000, 2000);
    await evaluation('failed', 120_000, 4000);
    await evaluation('aborted', 3_600_000 + 60_000, null);
    const build = async (status: string, startMs: number, endMs: number, evaluations: string[]) => {
      const [drv] = await kiln.sql<{ id: string }[]>`insert into derivations (drv_path, name, system, outputs) values (${`/nix/store/${randomUUID().replace(/-/g, '').slice(0, 32)}-x.drv`}, 'x', 'x86_64-linux', '{}') returning id`;
      const [db] = await kiln.sql<{ id: string }[]>`insert into derivation_builds (derivation_id, status, started_at, finished_at) values (${drv!.id}, ${status}, ${at(startMs)}, ${at(endMs)}) returning id`;
      for (const e of evaluations) await kiln.sql`insert into builds (evaluation_id, derivation_build_id) values (${e}, ${db!.id})`;
    };
    const e2 = await evaluation('completed', 150_000, 1000);
    await build('completed', 0, 10_000, [e1, e2]); // shared by two evaluations: counted once
    await build('failed', 0, 30_000, [e1]);
    await build('completed', 3_600_000, 3_600_000 + 5_000, [e2]);
    const res = await kiln.api<{ evaluations: Record<string, unknown>[]; builds: Record<string, unknown>[] }>('GET', `/projects/acme/web/metrics?from=${at(0).toISOString()}&to=${at(2 * 3_600_000).toISOString()}`, { token: vic.token });
    t.equal(res.status, 200, JSON.stringify(res.message));
    t.same(res.message.evaluations, [
      { start: at(0).toISOString(), created: 3, completed: 2, failed: 1, aborted: 0, eval_seconds_avg: 2.333 },
      { start: at(3_600_000).toISOString(), created: 1, completed: 0, failed: 0, aborted: 1, eval_seconds_avg: null },
    ]);
    t.same(res.message.builds, [
      { start: at(0).toISOString(), completed: 1, failed: 1, build_seconds_avg: 20, build_seconds_max: 30 },
      { start: at(3_600_000).toISOString(), completed: 1, failed: 0, build_seconds_avg: 5, build_seconds_max: 5 },
    ]);
    const day = await kiln.api<{ evaluations: { created: number }[] }>('GET', '/projects/acme/web/metrics?period=day', { token: ada.token });
    t.equal(day.message.evaluations.reduce((n, b) => n + b.created, 0), 4);
    t.same([(await kiln.api('GET', '/projects/acme/web/metrics', { token: eve.token })).status], [404], 'a stranger: no such project');
  });
});
