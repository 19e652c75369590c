// The evaluation pool with real Nix (worker/evalPool.ts): a flake's attributes are split into
// calls across worker.eval.forkWorkers subprocesses, at most that many at once; a broken attribute
// fails alone; below worker.system.minFreeRamMb the largest subprocess, which restores the
// margin, is killed and only the attribute that needed the memory fails, with the reason, which the
// evaluation's activity also reports; and no subprocess outlives its call (worker.eval.maxRss).
// The host's memory is a probe: a host of HOST_BYTES where the pool's subprocesses, at their real
// resident sizes, are all that runs.
import t from 'tap';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { parseAttributeWildcard } from '../../protocol/index.js';
import { EvalPool } from '../../worker/evalPool.js';
import { defaultForkWorkers, evaluateFlake, type PoolSettings } from '../../worker/flakeEval.js';
import { checkoutCommit } from '../../worker/gitCheckout.js';
import { minFreeRamBytes, poolOnlyHost, procMemoryProbe, type MemoryProbe } from '../../worker/memoryProbe.js';
import { createFlakeRepo } from '../support/flakeRepo.js';
import { nixEnv, requireNix, tempDir } from '../support/nixStore.js';
import { TEST_NIX_CONFIG } from '../support/workerProcess.js';

requireNix();
const dir = tempDir('kiln-worker-pool-');
const env: NodeJS.ProcessEnv = { ...nixEnv(), NIX_CONFIG: TEST_NIX_CONFIG };
const nonce = randomUUID();
const MIB = 1024 * 1024;
const HOST_BYTES = 600 * MIB;
const MIN_FREE = 200 * MIB;

const derivation = (name: string) => `derivation { name = ${name}; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" "echo > $out" ]; nonce = "${nonce}"; }`;
/** About 600 MiB resident before its name is known (5 million list elements summed). */
const HOG = derivation('"kiln-hog-${toString (builtins.foldl\' builtins.add 0 (builtins.genList (x: x) 5000000))}"');

const poolHost = () => poolOnlyHost(HOST_BYTES);

async function evaluate(name: string, attributes: Record<string, string>, pool: PoolSettings, activity: string[] = []) {
  const body = Object.entries(attributes).map(([attr, value]) => `${attr} = ${value};`).join('\n');
  const repo = createFlakeRepo(join(dir, name), { 'flake.nix': `{ outputs = { self }: { packages.x86_64-linux = { ${body} }; }; }` });
  const checkout = await checkoutCommit(join(dir, 'worker'), randomUUID(), repo.url, repo.commit, env);
  if (!checkout.ok) throw new Error(checkout.failure.message);
  const wildcard = parseAttributeWildcard('packages.x86_64-linux.*');
  if (!wildcard.ok) throw new Error(wildcard.reason);
  return evaluateFlake({ flakeRef: checkout.flakeRef, wildcard: wildcard.value, env, pool, onActivity: (m) => activity.push(m) });
}

const names = (list: readonly { path: string[] }[]) => list.map((a) => a.path[2]).sort();

t.test('the attributes are split across the subprocesses and a broken one fails alone', async (t) => {
  const good = Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`ok${i}`, derivation(`"kiln-pool-ok${i}"`)]));
  const result = await evaluate('broken', { ...good, thrown: 'throw "kiln-pool-boom"', mistyped: derivation('(1 + "x")') }, { size: 2, minFreeBytes: MIN_FREE, memory: poolHost() });
  if (!result.ok) return t.fail(result.failure.message);
  t.same(names(result.value.attributes), Object.keys(good).sort(), 'every good attribute evaluated');
  t.same(names(result.value.errors), ['mistyped', 'thrown'], 'the two broken attributes failed');
  t.match(result.value.errors.find((e) => e.path[2] === 'thrown')?.message, /kiln-pool-boom/, 'with its own message');
  t.ok(result.value.pool.calls >= 8, `the 14 attributes went in several calls (${result.value.pool.calls})`);
  t.equal(result.value.pool.memoryKills, 0, 'nothing was killed for memory');
});

t.test('below minFreeRam the subprocess that holds the memory is killed, and only its attribute fails', async (t) => {
  const small = Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`small${i}`, derivation(`"kiln-pool-small${i}"`)]));
  const activity: string[] = [];
  const result = await evaluate('hog', { ...small, hog: HOG }, { size: 2, minFreeBytes: MIN_FREE, memory: poolHost() }, activity);
  if (!result.ok) return t.fail(result.failure.message);
  t.same(names(result.value.attributes), Object.keys(small).sort(), 'the other attributes evaluated');
  t.same(names(result.value.errors), ['hog'], 'the attribute that needed the memory failed');
  t.match(result.value.errors[0]?.message, /evaluation subprocess, holding \d+ MiB, was killed: the host had \d+ MiB of memory available, below worker\.system\.minFreeRamMb \(200 MiB\)/, 'with the reason');
  t.equal(result.value.pool.memoryKills, 1, 'one kill');
  t.ok(result.value.pool.peakRssBytes > HOST_BYTES - MIN_FREE - 100 * MIB, 'the watch saw the subprocess grow');
  t.ok(activity.some((m) => /^an evaluation call failed: its evaluation subprocess, holding \d+ MiB, was killed/.test(m)), 'the activity says so');
});

t.test('with room enough the same attribute evaluates', async (t) => {
  const result = await evaluate('roomy', { hog: HOG }, { size: 1, minFreeBytes: MIN_FREE, memory: procMemoryProbe });
  if (!result.ok) return t.fail(result.failure.message);
  t.same(names(result.value.attributes), ['hog']);
  t.equal(result.value.pool.memoryKills, 0);
});

/** A real process that waits for its kill, in a process group of its own as Nix's are. */
function sleeper(onStart: (pid: number) => void): Promise<string> {
  const child = spawn('sleep', ['600'], { detached: true, stdio: 'ignore' });
  onStart(child.pid!);
  return new Promise((resolve) => child.on('close', (_code, signal) => resolve(String(signal))));
}

t.test('the victim is the largest subprocess, which restores the margin; at most size run at once', async (t) => {
  const sizes = [300 * MIB, 100 * MIB, 50 * MIB];
  const pids: number[] = [];
  let mostAtOnce = 0;
  const probe: MemoryProbe = {
    rssBytes: (pid) => sizes[pids.indexOf(pid)] ?? null,
    // 80 MiB short of the margin once all three run, until a kill gives it back.
    availableBytes: () => (pids.length < 3 || pool.memoryKills > 0 ? HOST_BYTES : MIN_FREE - 80 * MIB),
  };
  const pool = new EvalPool({ size: 3, minFreeBytes: MIN_FREE, memory: probe, watchIntervalMs: 10 });
  t.teardown(() => pids.forEach((pid) => {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // ended already
    }
  }));
  const started = (pid: number) => {
    pids.push(pid);
    mostAtOnce = Math.max(mostAtOnce, pool.pids().length);
  };
  const calls = [0, 1, 2].map(() => pool.run((onStart) => sleeper((pid) => {
    onStart(pid);
    started(pid);
  })));
  let fourthStartedEarly = false;
  const fourth = pool.run(async () => {
    fourthStartedEarly = pool.memoryKills === 0;
    return 'the fourth ran';
  });
  const killed = await Promise.race(calls.map((call, i) => call.then((outcome) => ({ i, outcome }))));
  t.equal(killed.i, 0, 'the 300 MiB one, not the 100 MiB one that would have covered the 80 MiB short');
  t.match(killed.outcome, { killedForMemory: true, message: /holding 300 MiB/ });
  t.same(await fourth, { killedForMemory: false, result: 'the fourth ran' });
  t.notOk(fourthStartedEarly, 'the fourth call waited for a free place');
  t.equal(mostAtOnce, 3, 'three ran at once');
  for (const pid of [pids[1]!, pids[2]!]) process.kill(-pid, 'SIGTERM');
  t.same((await Promise.all(calls)).map((c) => c.killedForMemory), [true, false, false]);
  t.equal(pool.memoryKills, 1, 'one kill only');
  t.same(pool.pids(), [], 'no subprocess outlives its call (so none is idle above worker.eval.maxRss)');
});

t.test('the defaults: minFreeRamMb 0 is 10% of memory within 128 MiB to 1 GiB; forkWorkers null is the cores up to 16', async (t) => {
  const GIB = 1024 * MIB;
  t.equal(minFreeRamBytes(300, 64 * GIB), 300 * MIB, 'a configured margin as it is');
  t.equal(minFreeRamBytes(0, 4 * GIB), Math.floor(4 * GIB / 10), '10% of 4 GiB');
  t.equal(minFreeRamBytes(0, 512 * MIB), 128 * MIB, 'at least 128 MiB');
  t.equal(minFreeRamBytes(0, 64 * GIB), GIB, 'at most 1 GiB');
  t.equal(defaultForkWorkers(), Math.min(16, availableParallelism()));
});
