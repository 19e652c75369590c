// Per-build and per-evaluation statistics on the server (docs/metrics.md, "Build and evaluation
// statistics"), with a protocol-level worker against the real server and PostgreSQL: the worker's
// evalActivity becomes evaluation.activity in the evaluation's scope (what the task and evaluation
// live sockets filter on), its evaluator statistics (hotspots and flake graph too) show on GET /evals/{id}, each build attempt's
// sample is stored and the latest shows on GET /builds/{id} (while it runs, the heartbeats' readings
// of it, marked running), and samples go after retentionDays.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { jobFailure } from '../../../protocol/index.js';
import { deleteOldBuildSamples } from '../../../services/builds/index.js';
import { BuildSampleWriter, insertBuildSamples } from '../../../services/builds/buildStatistics.js';
import { startTestKiln } from '../../support/kiln.js';
import { subscribedProject } from '../../support/subscribedProject.js';
import { handshake, testHello } from '../../support/protoClient.js';
import { derivationNode, narHash } from '../../support/derivationNodes.js';
import { eventually } from '../../support/eventually.js';

const DAY = 86_400_000;

t.test('statistics of an evaluation and of each build attempt', async (t) => {
  // metrics on (a scrape token): kiln_dispatch_latency_seconds is checked below
  const tokenDir = mkdtempSync(join(tmpdir(), 'kiln-stats-token-'));
  t.teardown(() => rmSync(tokenDir, { recursive: true, force: true }));
  writeFileSync(join(tokenDir, 'token'), 'scrape-token');
  const kiln = await startTestKiln(t, { localWorker: true, 'build.retryBackoffSecs': 0, 'build.maxAttempts': 3, 'metrics.tokenFile': join(tokenDir, 'token') });
  const activity: { frame: Record<string, unknown>; scope: Record<string, unknown> }[] = [];
  kiln.events.bus.subscribe((event) => {
    if (event.event === 'evaluation.activity') activity.push({ frame: JSON.parse(event.frame) as Record<string, unknown>, scope: event.scope as Record<string, unknown> });
  });
  const { token, projectId } = await subscribedProject(kiln);
  const hello = testHello();
  const worker = await handshake(`ws://127.0.0.1:${kiln.port}/proto`, hello);
  t.teardown(() => worker.close());
  await worker.next('welcome');
  const evaluated = await kiln.api<string>('POST', `/tasks/${projectId}/default/evaluate`, { token, body: { commit: 'a'.repeat(40) } });
  t.equal(evaluated.status, 200, String(evaluated.message));
  const evaluationId = evaluated.message;

  const evalJob = await worker.next('evalJob');
  worker.send({ t: 'jobAccepted', jobId: evalJob.jobId });
  worker.send({ t: 'evalActivity', jobId: evalJob.jobId, kind: 'fetch', message: 'fetching the repository' });
  worker.send({ t: 'evalActivity', jobId: evalJob.jobId, kind: 'eval', message: 'evaluating attributes 1–1 of 1' });
  const only = derivationNode('only');
  worker.send({ t: 'evalBatch', jobId: evalJob.jobId, derivations: [only.derivation], attributes: [], errors: [] });
  worker.send({ t: 'evalBatch', jobId: evalJob.jobId, derivations: [], attributes: [{ path: ['packages', 'x86_64-linux', 'only'], drvPath: only.drvPath, outputs: { out: only.out } }], errors: [] });
  const stats = {
    runs: 3, cpuSeconds: 1.25, thunks: 1000, functionCalls: 200, primOpCalls: 30, values: 4000, lookups: 50, allocatedBytes: 123456, peakHeapBytes: 402718720,
    hotspots: { functions: [{ name: 'mk', file: 'flake.nix', line: 5, count: 12 }, { name: null, file: null, line: 2, count: 3 }], primOps: [{ name: 'map', count: 7 }] },
    flakeGraph: {
      root: 'root', truncated: false, edges: [{ from: 'root', to: 'nixpkgs', input: 'nixpkgs' }],
      nodes: [{ id: 'nixpkgs', type: 'github', source: 'NixOS/nixpkgs', rev: 'b'.repeat(40), lastModified: 1700000000 }, { id: 'root', type: null, source: null, rev: null, lastModified: null }],
    },
  };
  worker.send({ t: 'evalResult', jobId: evalJob.jobId, commit: 'a'.repeat(40), derivationCount: 1, attributeCount: 1, errorCount: 0, durationMs: 2500, stats });

  await t.test('evaluation.activity, in the evaluation\'s scope', async (t) => {
    await eventually(() => activity.length >= 2, { message: 'both activity events' });
    t.match(activity.map((a) => a.frame), [
      { event: 'evaluation.activity', content: { evaluation_id: evaluationId, task: 'default', kind: 'fetch', message: 'fetching the repository' } },
      { content: { kind: 'eval', message: 'evaluating attributes 1–1 of 1' } },
    ]);
    t.match(activity[0]!.scope, { projectId, evaluationId });
  });

  await t.test('GET /evals/{id} shows the evaluation job\'s time and the evaluator\'s statistics', async (t) => {
    const got = await eventually(async () => (await kiln.api<{ statistics: unknown }>('GET', `/evals/${evaluationId}`, { token })).message,
      { until: (e) => (e.statistics as { wall_seconds: number | null }).wall_seconds !== null, message: 'the statistics are stored' });
    t.same(got.statistics, {
      wall_seconds: 2.5,
      evaluator: {
        runs: 3, cpu_seconds: 1.25, thunks: 1000, function_calls: 200, primop_calls: 30, values: 4000, lookups: 50, allocated_bytes: 123456, peak_heap_bytes: 402718720,
        hotspots: { functions: [{ name: 'mk', file: 'flake.nix', line: 5, count: 12 }, { name: null, file: null, line: 2, count: 3 }], primops: [{ name: 'map', count: 7 }] },
        flake_graph: {
          root: 'root', truncated: false, edges: [{ from: 'root', to: 'nixpkgs', input: 'nixpkgs' }],
          nodes: [{ id: 'nixpkgs', type: 'github', source: 'NixOS/nixpkgs', rev: 'b'.repeat(40), last_modified: 1700000000 }, { id: 'root', type: null, source: null, rev: null, last_modified: null }],
        },
      },
    });
  });

  const builds = await kiln.api<{ build_id: string }[]>('GET', `/evals/${evaluationId}/builds`, { token });
  const buildId = builds.message[0]!.build_id;

  await t.test('each attempt leaves a sample; GET /builds/{id} shows the latest', async (t) => {
    const resources = { cpuUserSeconds: 3.5, cpuSystemSeconds: 0.25, peakMemoryBytes: 1 << 20, ioReadBytes: 4096, ioWriteBytes: 8192, oomKills: 0 };
    const first = await worker.next('buildJob');
    worker.send({ t: 'jobAccepted', jobId: first.jobId });
    worker.send({ t: 'jobFailed', jobId: first.jobId, failure: jobFailure('network', 'network happened'), durationMs: 1500, logBytes: 0, logDroppedBytes: 0, resources: { ...resources, oomKills: 1 } });
    const second = await worker.next('buildJob');
    worker.send({ t: 'jobAccepted', jobId: second.jobId });
    // While it runs: the heartbeat's readings of it show as the running attempt's counters so far; a reading of a job this worker does not run is ignored.
    const reading = { wallSeconds: 2, cpuUserSeconds: 1.5, cpuSystemSeconds: 0.125, memoryBytes: 1 << 19, peakMemoryBytes: 1 << 19, ioReadBytes: 1024, ioWriteBytes: 2048, oomKills: 0 };
    worker.send({ t: 'heartbeat', seq: 1, load: { runningBuilds: 1, runningEvals: 0, load1: 1, memoryFreeBytes: 1, memoryTotalBytes: 2, storeFreeBytes: null },
      builds: [{ jobId: second.jobId, ...reading }, { jobId: first.jobId, ...reading, wallSeconds: 99 }, { jobId: 'no-such-job', ...reading }] });
    const running = await eventually(async () => (await kiln.api<{ resources: unknown }>('GET', `/builds/${buildId}`, { token })).message,
      { until: (b) => (b.resources as { attempt: number } | null)?.attempt === 2, message: 'the running attempt\'s reading' });
    t.same(running.resources, {
      attempt: 2, running: true, wall_seconds: 2, cpu_user_seconds: 1.5, cpu_system_seconds: 0.125, peak_memory_bytes: 524288, io_read_bytes: 1024, io_write_bytes: 2048, oom_kills: 0,
    });
    const output = { name: 'out', path: only.out, narHash: narHash(), narSize: 100, references: [], deriver: only.drvPath, ca: null };
    worker.send({ t: 'buildResult', jobId: second.jobId, drvPath: only.drvPath, outputs: [output], alreadyValid: false, durationMs: 4000, logBytes: 0, logDroppedBytes: 0, resources });
    const build = await eventually(async () => (await kiln.api<{ status: string; resources: unknown }>('GET', `/builds/${buildId}`, { token })).message,
      { until: (b) => (b.resources as { running: boolean } | null)?.running === false && (b.resources as { attempt: number }).attempt === 2, message: 'the second attempt\'s sample' });
    t.same(build.resources, {
      attempt: 2, running: false, wall_seconds: 4, cpu_user_seconds: 3.5, cpu_system_seconds: 0.25, peak_memory_bytes: 1048576, io_read_bytes: 4096, io_write_bytes: 8192, oom_kills: 0,
    });
    const samples = await kiln.sql<{ attempt: number; wall_ms: string; oom_kills: number }[]>`select attempt, wall_ms, oom_kills from build_resource_samples order by attempt`;
    t.same(samples, [{ attempt: 1, wall_ms: '1500', oom_kills: 1 }, { attempt: 2, wall_ms: '4000', oom_kills: 0 }], 'the failed attempt kept its own; the 99 s reading of the ended first job went nowhere');
    // A heartbeat after the result, still naming the job (a worker that read its cgroup late), changes nothing: the job ended.
    worker.send({ t: 'heartbeat', seq: 2, load: { runningBuilds: 0, runningEvals: 0, load1: 1, memoryFreeBytes: 1, memoryTotalBytes: 2, storeFreeBytes: null }, builds: [{ jobId: second.jobId, ...reading }] });
    await worker.next('heartbeatAck');
    t.same((await kiln.sql`select wall_ms from build_resource_samples where attempt = 2`)[0], { wall_ms: '4000' });
  });

  await t.test('dispatch latency and job time of evaluations and builds: Prometheus and the stored phase samples', async (t) => {
    const scrape = await fetch(`${kiln.url}/metrics`, { headers: { authorization: 'Bearer scrape-token' } }).then((r) => r.text());
    const count = (kind: string) => Number(new RegExp(`^kiln_dispatch_latency_seconds_count\\{kind="${kind}"\\} (\\d+)$`, 'm').exec(scrape)?.[1] ?? 0);
    t.equal(count('evaluation'), 1, 'the evaluation, when its worker accepted it');
    t.equal(count('build'), 2, 'both attempts of the build');
    await kiln.upkeep.phaseFlush();
    const rows = await kiln.sql<{ kind: string; phase: string; n: number; ms: string }[]>`
      select kind, phase, sum(samples)::int as n, max(coalesce(max_ms, duration_ms)) as ms from phase_samples group by 1, 2 order by 1, 2`;
    t.same(rows.map((r) => [r.kind, r.phase, r.n]), [['build', 'dispatch', 2], ['build', 'run', 2], ['evaluation', 'dispatch', 1], ['evaluation', 'run', 1]]);
    t.equal(rows.find((r) => r.kind === 'build' && r.phase === 'run')?.ms, '4000', 'a build\'s run is the worker\'s measure');
    t.equal(rows.find((r) => r.kind === 'evaluation' && r.phase === 'run')?.ms, '2500');
  });

  await t.test('a running reading of an attempt that is not the build\'s started one shows as ended', async (t) => {
    // What a server process that died mid-build leaves: its row still says running, and another process re-queued the build
    // (requeueOrphanedJobs) without knowing of the reading. Set up on the rows, then put back.
    const [row] = await kiln.sql<{ id: string }[]>`select derivation_build_id as id from builds where id = ${buildId}`;
    await kiln.sql`update build_resource_samples set running = true where derivation_build_id = ${row!.id} and attempt = 2`;
    const show = async () => ((await kiln.api<{ resources: { running: boolean } }>('GET', `/builds/${buildId}`, { token })).message.resources.running);
    await kiln.sql`update derivation_builds set status = 'started' where id = ${row!.id}`;
    t.equal(await show(), true, 'the current attempt, started: running');
    await kiln.sql`update derivation_builds set status = 'queued' where id = ${row!.id}`;
    t.equal(await show(), false, 're-queued: not running');
    await kiln.sql`update derivation_builds set status = 'started', attempts = 3 where id = ${row!.id}`;
    t.equal(await show(), false, 'a later attempt started: not running');
    await kiln.sql`update derivation_builds set status = 'completed', attempts = 2 where id = ${row!.id}`;
    await kiln.sql`update build_resource_samples set running = false where derivation_build_id = ${row!.id} and attempt = 2`;
  });

  await t.test('samples go retentionDays after they were recorded, not before', async (t) => {
    // the two attempts' samples were recorded when their results came, seconds apart on a busy machine
    const [row] = await kiln.sql<{ oldest: Date; newest: Date }[]>`select min(recorded_at) as oldest, max(recorded_at) as newest from build_resource_samples`;
    const oldest = row!.oldest.getTime();
    const newest = row!.newest.getTime();
    t.equal(await deleteOldBuildSamples(kiln.sql, 90, new Date(oldest + 90 * DAY - 1000)), 0, 'a second before the oldest one\'s boundary');
    t.equal(await deleteOldBuildSamples(kiln.sql, 0, new Date(newest + 1000 * DAY)), 0, '0 keeps everything');
    t.equal(await deleteOldBuildSamples(kiln.sql, 90, new Date(newest + 90 * DAY + 1000)), 2, 'a second after the newest one\'s');
    t.equal((await kiln.api<{ resources: unknown }>('GET', `/builds/${buildId}`, { token })).message.resources, null);
  });

  await t.test('the samples of one turn go in together; one the database refuses costs only itself', async (t) => {
    const [row] = await kiln.sql<{ id: string }[]>`select derivation_build_id as id from builds where id = ${buildId}`;
    const at = new Date('2026-01-02T03:04:05Z');
    const writer = new BuildSampleWriter(kiln.sql, () => at);
    const sample = (attempt: number, oomKills: number, derivationBuildId = row!.id) => ({
      derivationBuildId, attempt, workerId: hello.workerId, wallMs: 10 * attempt,
      resources: { cpuUserSeconds: 1, cpuSystemSeconds: 0, peakMemoryBytes: null, ioReadBytes: null, ioWriteBytes: null, oomKills },
    });
    // a build the database does not know (its row went meanwhile): the foreign key refuses that sample only
    const results = await Promise.allSettled([writer.record(sample(10, 0)), writer.record(sample(11, 0, randomUUID())), writer.record(sample(12, 1))]);
    t.same(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled']);
    const rows = await kiln.sql<{ attempt: number; recorded_at: Date; oom_kills: number }[]>`
      select attempt, recorded_at, oom_kills from build_resource_samples where derivation_build_id = ${row!.id} and attempt >= 10 order by attempt`;
    t.same(rows, [{ attempt: 10, recorded_at: at, oom_kills: 0 }, { attempt: 12, recorded_at: at, oom_kills: 1 }]);
  });

  await t.test('a count past PostgreSQL\'s int is kept at its largest: a sample goes in whatever a worker counted', async (t) => {
    const [row] = await kiln.sql<{ id: string }[]>`select derivation_build_id as id from builds where id = ${buildId}`;
    const at = new Date('2026-01-02T03:04:05Z');
    // 2^40 passes the message schema (any safe integer) but not an int column; the sample is also
    // written inside a completion's transaction, which it must never make fail
    await insertBuildSamples(kiln.sql, [{ at, sample: {
      derivationBuildId: row!.id, attempt: 20, workerId: hello.workerId, wallMs: 1,
      resources: { cpuUserSeconds: 1, cpuSystemSeconds: 0, peakMemoryBytes: 2 ** 52, ioReadBytes: null, ioWriteBytes: null, oomKills: 2 ** 40 },
    } }]);
    const [kept] = await kiln.sql<{ oom_kills: number; peak_memory_bytes: string }[]>`
      select oom_kills, peak_memory_bytes from build_resource_samples where derivation_build_id = ${row!.id} and attempt = 20`;
    t.same(kept, { oom_kills: 2_147_483_647, peak_memory_bytes: String(2 ** 52) });
  });

  await t.test('samples recorded while an insert is under way go in one insert after it', async (t) => {
    const [row] = await kiln.sql<{ id: string }[]>`select derivation_build_id as id from builds where id = ${buildId}`;
    let inserts = 0;
    // the writer's statements, counted on their way to the real database
    const counted = new Proxy(kiln.sql, { apply: (target, self, args: Parameters<typeof kiln.sql>) => (inserts++, Reflect.apply(target, self, args)) });
    const writer = new BuildSampleWriter(counted, () => new Date());
    const sample = (attempt: number) => ({ derivationBuildId: row!.id, attempt, workerId: hello.workerId, wallMs: attempt, resources: null });
    const turn = () => new Promise<void>((resolve) => setImmediate(resolve));
    // The first insert is held under way: its foreign key check waits for this lock on the build's row.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let locked!: () => void;
    const lockTaken = new Promise<void>((resolve) => (locked = resolve));
    const holder = kiln.sql.begin(async (tx) => {
      await tx`select id from derivation_builds where id = ${row!.id} for update`;
      locked();
      await held;
    });
    await lockTaken;
    const written = [writer.record(sample(20))];
    await turn();
    await turn();
    written.push(writer.record(sample(21)));
    await turn();
    written.push(writer.record(sample(22)));
    await turn();
    release();
    await holder;
    await Promise.all(written);
    t.equal(inserts, 2, 'the first sample, then the two recorded in two later turns together');
    const rows = await kiln.sql<{ attempt: number }[]>`select attempt from build_resource_samples where derivation_build_id = ${row!.id} and attempt >= 20 order by attempt`;
    t.same(rows.map((r) => r.attempt), [20, 21, 22]);
  });
});
