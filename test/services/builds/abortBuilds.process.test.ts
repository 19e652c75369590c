// Aborting an evaluation stops the builds it has running, end to end with a real `kiln worker`
// process and real Nix: a derivation whose builder sleeps is cancelled on the worker (the Nix
// process and its builder are gone), its build ends `aborted` with build.aborted, and nothing of it
// reaches the cache. A build another open evaluation still wants keeps running until that one is
// aborted too.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { startTestKiln, type TestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { createFlakeRepo } from '../../support/flakeRepo.js';
import { spawnWorker } from '../../support/workerProcess.js';
import { requireNix } from '../../support/nixStore.js';
import { eventually as boundedWait } from '../../support/eventually.js';

requireNix();

const flake = (marker: string, seconds: number) => `{
  outputs = { self }: let
    system = "x86_64-linux";
  in {
    packages.\${system}.sleeper = derivation {
      inherit system;
      name = "kiln-abort-sleeper";
      builder = "/bin/sh";
      # builders get an empty PATH: absolute paths only. The marker finds the process in /proc.
      args = [ "-c" "echo started ${marker}; /bin/sleep ${seconds}; echo ${marker} > $out" ];
    };
  };
}
`;

interface Build { build_id: string; derivation_build: string; drv_path: string; status: string; failure: { class: string; reason: string } | null; outputs: Record<string, string | null> }

/** Command lines of the processes alive now that contain `text`. */
function processesWith(text: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    let cmdline = '';
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
    } catch {
      continue; // gone meanwhile
    }
    if (cmdline.includes(text) && pid !== String(process.pid)) found.push(`${pid}: ${cmdline}`);
  }
  return found;
}

/** Polls until `check` holds; the bound only keeps a broken build from hanging the suite. */
function eventually<T>(what: string, read: () => Promise<T> | T, check: (value: T) => boolean): Promise<T> {
  return boundedWait(read, { until: check, timeout: 60_000, interval: 100, message: what });
}

async function phaseOf(kiln: TestKiln, token: string, id: string): Promise<string> {
  return (await kiln.api<{ phase: string }>('GET', `/evals/${id}`, { token })).message.phase;
}

async function sleeperBuild(kiln: TestKiln, token: string, evaluationId: string): Promise<Build | undefined> {
  return (await kiln.api<Build[]>('GET', `/evals/${evaluationId}/builds`, { token })).message[0];
}

t.test('aborting an evaluation cancels its running build on the worker', { timeout: 240_000 }, async (t) => {
  const kiln = await startTestKiln(t, { localWorker: true });
  const work = mkdtempSync(join(tmpdir(), 'kiln-abort-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));
  const marker = `kiln-abort-${randomBytes(8).toString('hex')}`;
  // A duration no other process on the machine sleeps, so `/bin/sleep <seconds>` is this builder's.
  const seconds = 7_000_000 + randomBytes(3).readUIntBE(0, 3) % 1_000_000;
  const sleeping = `/bin/sleep ${seconds}`;
  const repo = createFlakeRepo(join(work, 'repo'), { 'flake.nix': flake(marker, seconds) });

  const { token } = await signUp(kiln, 'ada');
  t.equal((await kiln.api('PUT', '/orgs', { token, body: { name: 'acme' } })).status, 200);
  t.equal((await kiln.api('PUT', '/projects/acme', { token, body: { name: 'app', repository: repo.url, wildcard: 'packages.x86_64-linux.*' } })).status, 200);
  const [project] = await kiln.sql<{ id: string }[]>`select id from projects where name = 'app'`;
  const cache = await createTestCache(kiln.sql, 'main', { public: true });
  await kiln.sql`insert into subscriptions (project_id, cache_id, mode) values (${project!.id}, ${cache.id}, 0)`;

  const worker = spawnWorker({ serverUrl: `ws://127.0.0.1:${kiln.port}/proto`, baseDir: join(work, 'worker') });
  t.teardown(async () => {
    await worker.stop();
    // Whatever the outcome, no sleeper outlives the test.
    for (const line of [...processesWith(marker), ...processesWith(sleeping)]) {
      try {
        process.kill(Number(line.split(':')[0]), 'SIGKILL');
      } catch { /* gone */ }
    }
  });

  const evaluate = async () => {
    const made = await kiln.api<string>('POST', `/tasks/${project!.id}/default/evaluate`, { token, body: { commit: repo.commit } });
    if (made.status !== 200) throw new Error(`evaluate: ${String(made.message)}`);
    return made.message;
  };
  const first = await evaluate();
  t.ok((await eventually('the builder sleeps', () => processesWith(sleeping), (p) => p.length > 0)).length > 0, 'the sleeping builder runs on the worker');
  const build = (await sleeperBuild(kiln, token, first))!;
  t.equal(build.status, 'started');
  t.ok(processesWith(build.drv_path).length > 0, 'nix-store builds it');
  /** every process of the build: nix-store (names the .drv), the builder's shell (the marker), its sleep */
  const buildProcesses = () => [...processesWith(build.drv_path), ...processesWith(marker), ...processesWith(sleeping)];

  // A second evaluation of the same commit shares the running build.
  const second = await evaluate();
  t.equal(await eventually('the second evaluation is building', () => phaseOf(kiln, token, second), (p) => p === 'building'), 'building');
  t.equal((await sleeperBuild(kiln, token, second))!.derivation_build, build.derivation_build, 'one shared derivation build');

  t.test('a build another open evaluation wants keeps running', async (t) => {
    t.equal((await kiln.api('POST', `/evals/${first}`, { token, body: { method: 'abort' } })).status, 200);
    t.equal(await phaseOf(kiln, token, first), 'aborted');
    t.equal((await sleeperBuild(kiln, token, second))!.status, 'started', 'still started for the second evaluation');
    const [aborted] = await kiln.sql`select 1 from event_outbox where event = 'build.aborted' and build_id = ${build.build_id}`;
    t.notOk(aborted, 'no build.aborted');
    t.ok(processesWith(sleeping).length > 0, 'the builder still runs');
  });

  t.test('aborting the last evaluation that wants it kills the build: aborted, its event, nothing cached', async (t) => {
    t.equal((await kiln.api('POST', `/evals/${second}`, { token, body: { method: 'abort' } })).status, 200);
    const ended = (await sleeperBuild(kiln, token, second))!;
    t.equal(ended.status, 'aborted', 'the build is aborted at once');
    t.match(ended.failure, { class: 'FailedTransient', reason: 'cancelled' });
    const left = await eventually('the Nix process and its builder end', buildProcesses, (p) => p.length === 0);
    t.same(left, [], 'no process of the build is left (nix-store and the sleeping builder)');
    const [event] = await kiln.sql<{ body: string }[]>`
      select body from event_outbox where event = 'build.aborted' and build_id = (select id from builds where evaluation_id = ${second})`;
    t.ok(event, 'build.aborted is emitted for the aborted evaluation\'s build');
    if (event) t.match(JSON.parse(event.body), { event: 'build.aborted', content: { status: 'aborted', derivation_build: build.derivation_build, evaluation_id: second, failure: 'FailedTransient' } });
    const [cached] = await kiln.sql<{ n: number }[]>`select count(*)::int as n from cached_paths`;
    t.equal(cached!.n, 0, 'no path reached a cache');
    const out = ended.outputs['out'];
    if (out) t.equal((await fetch(`${kiln.url}/cache/main/${out.slice('/nix/store/'.length, '/nix/store/'.length + 32)}.narinfo`)).status, 404, 'the output is not in the cache');
    // The worker's answer ends the job: its log so far is stored then (only at a job's end).
    const log = await eventually('the job ends with its log', async () => (await fetch(`${kiln.url}/api/v1/builds/${ended.build_id}/log`, { headers: { authorization: `Bearer ${token}` } })).text(), (text) => text.includes(marker));
    t.match(log, `started ${marker}`, 'the cancelled job ended and its log was kept');
    t.equal((await sleeperBuild(kiln, token, second))!.status, 'aborted', 'the worker\'s answer changes nothing');
  });

  t.test('aborted is not a failure: a later evaluation builds the derivation again', async (t) => {
    const third = await evaluate();
    const again = await eventually('the build runs again', async () => (await sleeperBuild(kiln, token, third))?.status, (s) => s === 'started');
    t.equal(again, 'started', 'queued again and dispatched');
    t.ok((await eventually('the builder sleeps again', () => processesWith(sleeping), (p) => p.length > 0)).length > 0);
    t.equal((await kiln.api('POST', `/evals/${third}`, { token, body: { method: 'abort' } })).status, 200);
    t.same(await eventually('the build ends again', buildProcesses, (p) => p.length === 0), []);
  });

  t.test('one build aborted on its own: refused while another open evaluation wants it, then killed on the worker', async (t) => {
    const fourth = await evaluate();
    const running = await eventually('the build runs again', async () => (await sleeperBuild(kiln, token, fourth))?.status, (s) => s === 'started');
    t.equal(running, 'started');
    const target = (await sleeperBuild(kiln, token, fourth))!;
    const fifth = await evaluate();
    t.equal(await eventually('the fifth evaluation is building', () => phaseOf(kiln, token, fifth), (p) => p === 'building'), 'building');
    const shared = await kiln.api<string>('POST', `/builds/${target.build_id}`, { token, body: { method: 'abort' } });
    t.equal(shared.status, 409);
    t.equal(shared.code, 'build_shared', 'the fifth evaluation wants it too');
    t.equal((await sleeperBuild(kiln, token, fifth))!.status, 'started', 'and it runs on');
    t.equal((await kiln.api('POST', `/evals/${fifth}`, { token, body: { method: 'abort' } })).status, 200);
    const aborted = await kiln.api<string>('POST', `/builds/${target.build_id}`, { token, body: { method: 'abort' } });
    t.equal(aborted.status, 200, aborted.message);
    t.match((await sleeperBuild(kiln, token, fourth))!, { status: 'aborted', failure: { class: 'FailedTransient', reason: 'cancelled' } });
    t.same(await eventually('the Nix process and its builder end', buildProcesses, (p) => p.length === 0), [], 'the job was cancelled on the worker');
    t.equal(await phaseOf(kiln, token, fourth), 'completed', 'nothing of the evaluation is left to run: it ends');
    const again = await kiln.api<string>('POST', `/builds/${target.build_id}`, { token, body: { method: 'abort' } });
    t.equal(again.code, 'evaluation_finished', 'a finished evaluation\'s builds are history');
  });
});
