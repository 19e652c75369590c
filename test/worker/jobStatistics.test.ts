// Per-build and per-evaluation statistics from a real worker (docs/metrics.md, "Build and
// evaluation statistics"): real Nix writes its evaluator statistics (NIX_SHOW_STATS), a build runs
// in a cgroup v2 directory the worker makes under worker.build.cgroup and the kernel's counters come
// back with the result (and, while it runs, with each heartbeat); the worker says what the evaluation is doing (evalActivity). The
// evaluation's hotspots (NIX_COUNT_CALLS) and flake graph (its flake.lock) come with its statistics. Without the
// options nothing is measured, and a worker.build.cgroup that is no cgroup costs a warning only.
import t, { type Test } from 'tap';
import { randomUUID } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { loadConfig } from '../../config/index.js';
import { startWorker } from '../../worker/index.js';
import { createFlakeRepo, shellFlake } from '../support/flakeRepo.js';
import { nix, requireNix, tempDir } from '../support/nixStore.js';
import { startProtoServer, type WorkerSession } from '../support/protoServer.js';
import { TEST_NIX_CONFIG } from '../support/workerProcess.js';
import { eventually } from '../support/eventually.js';
import { cgroupRoot } from '../support/cgroups.js';

requireNix();
const PROJECT = randomUUID();
const dir = tempDir('kiln-worker-stats-');
const nixEnv = { ...process.env, NIX_REMOTE: 'local', NIX_CONFIG: TEST_NIX_CONFIG };
// One input, a store path (the only local source kiln fetches), for the flake graph. Named
// `source` so that its lock's lastModified is 0 on a fresh store as on a used one (pureEvaluation.test.ts).
const inputDir = join(dir, 'source');
mkdirSync(inputDir);
writeFileSync(join(inputDir, 'word'), 'input');
const inputPath = execFileSync('nix-store', ['--add', inputDir], { env: nixEnv, encoding: 'utf8' }).trim();
const inputSource = { type: 'path', path: inputPath };
const inputHash = nix(['hash', 'path', inputPath]).trim();
// A build that burns CPU in its own process until the test opens its gate (after a heartbeat has carried
// a reading of it: a fixed loop was sometimes over before the first heartbeat): the cgroup must count
// it, although it is the builder's and not the worker's. The sandbox is off in tests, so the builder sees the gate.
const gate = join(dir, 'busy-gate');
const repo = createFlakeRepo(join(dir, 'repo'), {
  'flake.nix': shellFlake(randomUUID(), `      busy = mk "kiln-test-busy" "i=0; while [ ! -e ${gate} ]; do i=$((i+1)); done; echo $i > $out";
      busyAgain = mk "kiln-test-busy-again" "i=0; while [ $i -lt 1000 ]; do i=$((i+1)); done; echo $i > $out";`)
    .replace('outputs = { self }:', `inputs.dep = { url = "path:${inputPath}"; flake = false; };\n  outputs = { self, dep }:`),
  'flake.lock': JSON.stringify({
    nodes: { dep: { flake: false, locked: { ...inputSource, lastModified: 0, narHash: inputHash }, original: inputSource }, root: { inputs: { dep: 'dep' } } },
    root: 'root',
    version: 7,
  }),
});

async function workerWith(t: Test, overrides: Record<string, unknown>): Promise<WorkerSession> {
  const server = await startProtoServer({ openModeProjects: [] });
  const name = randomUUID().slice(0, 8);
  const config = loadConfig({
    scope: 'worker', env: {},
    overrides: { 'worker.serverUrl': server.url, 'worker.baseDir': join(dir, `worker-${name}`), 'worker.gcrootsDir': join(dir, `gcroots-${name}`), ...overrides },
  }).values;
  const worker = await startWorker(config, { log: pino({ level: process.env['KILN_TEST_LOG'] ? 'debug' : 'silent' }), software: 'kiln test', env: nixEnv });
  t.teardown(async () => {
    await worker.stop();
    await server.close();
  });
  return server.nextWorker();
}

async function evaluate(session: WorkerSession, jobId: string) {
  session.send({ t: 'evalJob', project: PROJECT, jobId, repository: repo.url, commit: repo.commit, attributes: 'packages.x86_64-linux.*', timeoutSecs: 120 });
  const evaluated = await session.evalOutcome(jobId);
  if (evaluated.final.t !== 'evalResult') throw new Error(`the evaluation failed: ${JSON.stringify(evaluated.final)}`);
  const drv = (name: string) => evaluated.batches.flatMap((b) => b.attributes).find((a) => a.path[2] === name)!.drvPath;
  return { result: evaluated.final, drv };
}

t.test('with worker.eval.metrics and worker.build.metrics', async (t) => {
  const root = cgroupRoot();
  if (root === null) return t.fail('this machine has no cgroup v2 hierarchy: the build statistics cannot be tested');
  const parent = join(root, `kiln-test-${randomUUID().slice(0, 8)}`);
  mkdirSync(parent);
  t.teardown(() => rmdirSync(parent));
  const session = await workerWith(t, { 'worker.eval.metrics': true, 'worker.build.metrics': true, 'worker.build.cgroup': parent });

  const { result, drv } = await evaluate(session, 'e');
  const stats = result.stats;
  t.ok(stats, 'the evaluation result carries the evaluator\'s statistics');
  // Two runs at least: the attribute selection and each call of the pool are `nix eval`s; the lock check may be one more.
  t.ok(stats!.runs >= 2, `${stats!.runs} nix eval runs counted`);
  t.ok(stats!.thunks > 0 && stats!.functionCalls > 0 && stats!.values > 0, 'thunks, calls and values were counted');
  t.ok(stats!.allocatedBytes > 0 && stats!.peakHeapBytes > 0, 'heap and allocation');
  t.ok(stats!.cpuSeconds > 0, 'evaluator CPU time');
  // Hotspots: the flake's own functions by a path relative to the flake, never the worker's directories.
  const hotspots = stats!.hotspots;
  t.ok(hotspots && hotspots.functions.length > 0 && hotspots.primOps.length > 0, `hotspots: ${JSON.stringify(hotspots)}`);
  const mk = hotspots!.functions.find((f) => f.name === 'mk');
  t.equal(mk?.file, 'flake.nix', 'the flake\'s `mk`, relative to the flake');
  t.ok(mk!.count >= 2, 'called for each of its two packages');
  t.notOk(JSON.stringify(hotspots).includes(dir), 'no file under the worker\'s directories in full');
  t.ok(hotspots!.functions.every((f, i, all) => i === 0 || all[i - 1]!.count >= f.count), 'most called first');
  t.same(stats!.flakeGraph, {
    root: 'root',
    nodes: [{ id: 'dep', type: 'path', source: inputPath, rev: null, lastModified: 0 }, { id: 'root', type: null, source: null, rev: null, lastModified: null }],
    edges: [{ from: 'root', to: 'dep', input: 'dep' }],
    truncated: false,
  }, 'the flake graph is the flake.lock');

  const activity = [];
  for (;;) {
    const m = await Promise.race([session.next('evalActivity', 'e'), new Promise<null>((resolve) => setImmediate(() => resolve(null)))]);
    if (m === null) break;
    activity.push(m);
  }
  t.same(activity.slice(0, 2).map((a) => [a.kind, a.message]), [['fetch', `fetching ${repo.url} at ${repo.commit}`], ['fetch', `fetched ${repo.commit}`]]);
  t.ok(activity.some((a) => a.kind === 'eval' && /^evaluating 2 attributes in \d calls?, up to \d at once$/.test(a.message)), JSON.stringify(activity.map((a) => a.message)));

  session.send({ t: 'buildJob', jobId: 'b', drvPath: drv('busy'), substituters: [], targetCaches: [], timeoutSecs: 120, maxSilentSecs: 120 });
  const readingOfB = () => session.heartbeats.flatMap((h) => h.builds ?? []).find((r) => r.jobId === 'b' && r.cpuUserSeconds + r.cpuSystemSeconds > 0);
  await eventually(readingOfB, { timeout: 60_000, message: 'a heartbeat carries a reading of the running build' });
  writeFileSync(gate, 'open');
  const built = await session.outcome('b');
  t.equal(built.t, 'buildResult', JSON.stringify(built));
  const resources = built.t === 'buildResult' ? built.resources : undefined;
  t.ok(resources, 'the build result carries the cgroup\'s counters');
  t.ok(resources!.cpuUserSeconds + resources!.cpuSystemSeconds > 0, `the builder's CPU time was counted: ${JSON.stringify(resources)}`);
  // What the kernel does not count in this cgroup is null, not 0: here only what the enabled controllers give.
  const memory = readFileSync(join(parent, 'cgroup.subtree_control'), 'utf8').split(/\s+/).includes('memory');
  t.equal(resources!.peakMemoryBytes !== null, memory, `peak memory is ${memory ? 'counted with' : 'null without'} the memory controller`);
  // removed once the result is sent, not before (worker/buildJob.ts): a bound, not a timing
  t.ok(await eventually(async () => !readdirSync(parent).some((entry) => entry.startsWith('kiln-build-')), { until: (gone) => gone, message: 'the build cgroup removed' }), 'no build cgroup is left behind');
  // While it ran (several seconds of CPU, a heartbeat a second), the heartbeats carried its counters so far.
  const readings = session.heartbeats.flatMap((h) => h.builds ?? []).filter((r) => r.jobId === 'b');
  t.ok(readings.length > 0, 'heartbeats carried readings of the running build');
  const last = readings.at(-1)!;
  t.ok(last.wallSeconds > 0 && last.cpuUserSeconds + last.cpuSystemSeconds > 0, `a reading counts the builder's time so far: ${JSON.stringify(last)}`);
  t.ok(last.cpuUserSeconds <= resources!.cpuUserSeconds, 'so far is no more than the total');
  t.equal(last.memoryBytes !== null, memory, 'memory in use with the memory controller');
  const after = session.heartbeats.length;
  await eventually(() => session.heartbeats.length >= after + 2, { message: 'two more heartbeats' });
  t.same(session.heartbeats.slice(after).flatMap((h) => h.builds ?? []), [], 'an ended build is no longer read');
});

t.test('without the options nothing is measured; a worker.build.cgroup that is no cgroup costs only the numbers', async (t) => {
  const notACgroup = join(dir, 'not-a-cgroup');
  mkdirSync(notACgroup, { recursive: true });
  const session = await workerWith(t, { 'worker.eval.metrics': false, 'worker.build.metrics': true, 'worker.build.cgroup': notACgroup });
  const { result, drv } = await evaluate(session, 'e2');
  t.equal(result.stats, undefined, 'no evaluator statistics with worker.eval.metrics false');
  session.send({ t: 'buildJob', jobId: 'b2', drvPath: drv('busyAgain'), substituters: [], targetCaches: [], timeoutSecs: 120, maxSilentSecs: 120 });
  const built = await session.outcome('b2');
  t.match(built, { t: 'buildResult' }, 'the build still runs');
  t.equal(built.t === 'buildResult' ? built.resources : 'x', undefined, 'and reports no resources');
  t.same(readdirSync(notACgroup), [], 'nothing is left in the directory');
});
