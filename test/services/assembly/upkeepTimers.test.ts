// The running server's interval timers on a clock that moves only when the test steps it (issue 20,
// items 6, 7 and 9): eval.cache.sweepIntervalSecs, cache.signSweepIntervalSecs, cache.debugIndexIntervalSecs and
// metrics.graphConsistencyIntervalSecs wake their upkeep loop once the interval has passed on the
// clock and not before; gc.intervalSecs and gc.deepIntervalSecs start a pass and a deep round; 0
// disables the graph check and the background deep round, and the sign and debug sweeps refuse 0.
// Nothing waits on real time for an assertion: each check waits for a sentinel loop (the traffic
// flush, every second of the clock) that ticks in the same sweep as the loops under test.
import t from 'tap';
import type { ActorNode, InspectNode } from '../../../supervisors/index.js';
import { loadConfig } from '../../../config/index.js';
import { startTestKiln, type TestKiln } from '../../support/kiln.js';
import { steppedClock } from '../../support/clock.js';
import { eventually } from '../../support/events.js';

const SECOND = 1000;

function findLoop(node: InspectNode, id: string): ActorNode | undefined {
  if (!('children' in node)) return node.id === id ? node : undefined;
  for (const child of node.children) {
    const found = findLoop(child, id);
    if (found) return found;
  }
  return undefined;
}

/** How many passes a loop has run or started; null when the server has no such loop. */
function passesOf(kiln: TestKiln, id: string): number | null {
  const node = findLoop(kiln.root.inspect(), id);
  if (!node) return null;
  const passes = Number(node.summary?.['passes'] ?? 0);
  return node.state === 'idle' ? passes : passes + 1;
}

/** Waits until the shared tick has swept the loops after the last clock step. */
async function sweptOnce(kiln: TestKiln, before: number, sentinel = 'traffic-flush'): Promise<void> {
  await eventually('the timers swept the stepped clock', async () => ((passesOf(kiln, sentinel) ?? 0) > before ? true : undefined));
}

/** Steps the clock to `secs` after `start` and returns the loops' pass counts once the sentinel (due every second) has swept. */
function stepperOf(kiln: TestKiln, clock: ReturnType<typeof steppedClock>, ids: readonly string[], sentinel: string) {
  const start = clock.now().getTime();
  const counts = () => Object.fromEntries(ids.map((id) => [id, passesOf(kiln, id)]));
  return {
    counts,
    stepTo: async (secs: number) => {
      const before = passesOf(kiln, sentinel) ?? 0;
      clock.step(start + secs * SECOND - clock.now().getTime());
      await sweptOnce(kiln, before, sentinel);
      return counts();
    },
  };
}

t.test('upkeep loops fire when their interval has passed on the clock, not before', async (t) => {
  const clock = steppedClock(new Date());
  const kiln = await startTestKiln(t, {
    'metrics.cacheFlushIntervalSecs': 1,
    'cache.debugIndexIntervalSecs': 200,
    'metrics.graphConsistencyIntervalSecs': 400,
    'cache.signSweepIntervalSecs': 600,
  }, { clock });
  const { counts, stepTo } = stepperOf(kiln, clock, ['debug-index', 'graph-consistency', 'sign-sweep'], 'traffic-flush');
  t.same(counts(), { 'debug-index': 0, 'graph-consistency': 0, 'sign-sweep': 0 }, 'nothing runs at start');

  t.same(await stepTo(199), { 'debug-index': 0, 'graph-consistency': 0, 'sign-sweep': 0 }, '1 s before the debug index interval: nothing');
  t.same(await stepTo(200), { 'debug-index': 1, 'graph-consistency': 0, 'sign-sweep': 0 }, 'cache.debugIndexIntervalSecs passed: the debug index backfill');
  t.same(await stepTo(399), { 'debug-index': 1, 'graph-consistency': 0, 'sign-sweep': 0 }, 'the next debug pass is due an interval after the last');
  t.same(await stepTo(400), { 'debug-index': 2, 'graph-consistency': 1, 'sign-sweep': 0 }, 'metrics.graphConsistencyIntervalSecs passed: the graph check');
  t.same(await stepTo(599), { 'debug-index': 2, 'graph-consistency': 1, 'sign-sweep': 0 });
  t.same(await stepTo(600), { 'debug-index': 3, 'graph-consistency': 1, 'sign-sweep': 1 }, 'cache.signSweepIntervalSecs passed: the sign sweep');
  await kiln.upkeep.settle();
});

t.test('metrics.rollupIntervalSecs, metrics.workerSampleIntervalSecs and metrics.instanceIntervalSecs wake their loops on the clock', async (t) => {
  const clock = steppedClock(new Date());
  const kiln = await startTestKiln(t, {
    'metrics.cacheFlushIntervalSecs': 1,
    'metrics.rollupIntervalSecs': 100,
    'metrics.workerSampleIntervalSecs': 150,
    'metrics.instanceIntervalSecs': 250,
  }, { clock });
  const { counts, stepTo } = stepperOf(kiln, clock, ['metric-rollup', 'worker-samples', 'instance-window'], 'traffic-flush');
  t.same(counts(), { 'metric-rollup': 0, 'worker-samples': 0, 'instance-window': 0 }, 'nothing runs at start');
  t.same(await stepTo(99), { 'metric-rollup': 0, 'worker-samples': 0, 'instance-window': 0 });
  t.same(await stepTo(100), { 'metric-rollup': 1, 'worker-samples': 0, 'instance-window': 0 }, 'metrics.rollupIntervalSecs passed: a rollup pass');
  t.same(await stepTo(149), { 'metric-rollup': 1, 'worker-samples': 0, 'instance-window': 0 });
  t.same(await stepTo(150), { 'metric-rollup': 1, 'worker-samples': 1, 'instance-window': 0 }, 'metrics.workerSampleIntervalSecs passed: worker samples');
  t.same(await stepTo(249), { 'metric-rollup': 2, 'worker-samples': 1, 'instance-window': 0 });
  t.same(await stepTo(250), { 'metric-rollup': 2, 'worker-samples': 1, 'instance-window': 1 }, 'metrics.instanceIntervalSecs passed: the instance window');
  await kiln.upkeep.settle();
});

t.test('eval.cache.sweepIntervalSecs wakes the shared evaluation cache\'s eviction on the clock', async (t) => {
  const clock = steppedClock(new Date());
  const kiln = await startTestKiln(t, { 'metrics.cacheFlushIntervalSecs': 1, 'eval.cache.sweepIntervalSecs': 300 }, { clock });
  const { counts, stepTo } = stepperOf(kiln, clock, ['eval-input-sweep'], 'traffic-flush');
  t.same(counts(), { 'eval-input-sweep': 0 }, 'nothing runs at start');
  t.same(await stepTo(299), { 'eval-input-sweep': 0 });
  t.same(await stepTo(300), { 'eval-input-sweep': 1 }, 'eval.cache.sweepIntervalSecs passed: an eviction pass');
  await kiln.upkeep.settle();
});

t.test('metrics.cacheFlushIntervalSecs wakes the traffic and phase flushes on the clock', async (t) => {
  const clock = steppedClock(new Date());
  const kiln = await startTestKiln(t, { 'metrics.cacheFlushIntervalSecs': 100, 'metrics.rollupIntervalSecs': 1 }, { clock });
  const { counts, stepTo } = stepperOf(kiln, clock, ['traffic-flush', 'phase-flush'], 'metric-rollup');
  t.same(counts(), { 'traffic-flush': 0, 'phase-flush': 0 }, 'nothing runs at start');
  t.same(await stepTo(99), { 'traffic-flush': 0, 'phase-flush': 0 });
  t.same(await stepTo(100), { 'traffic-flush': 1, 'phase-flush': 1 }, 'metrics.cacheFlushIntervalSecs passed: both flushes');
  await kiln.upkeep.settle();
});

t.test('metrics.graphConsistencyIntervalSecs 0 disables the graph check', async (t) => {
  const clock = steppedClock(new Date());
  const kiln = await startTestKiln(t, { 'metrics.cacheFlushIntervalSecs': 1, 'metrics.graphConsistencyIntervalSecs': 0 }, { clock });
  const before = passesOf(kiln, 'traffic-flush') ?? 0;
  clock.step(30 * 86_400 * SECOND);
  await sweptOnce(kiln, before);
  t.equal(passesOf(kiln, 'graph-consistency'), null, 'no graph consistency loop');
  t.equal(await kiln.upkeep.graphConsistency(), null, 'and a pass by hand does nothing');
  t.ok((passesOf(kiln, 'debug-index') ?? 0) > 0, 'while the other loops ran');
  await kiln.upkeep.settle();
});

t.test('cache.signSweepIntervalSecs and cache.debugIndexIntervalSecs refuse 0', async (t) => {
  for (const option of ['cache.signSweepIntervalSecs', 'cache.debugIndexIntervalSecs']) {
    t.throws(() => loadConfig({ scope: 'server', env: {}, overrides: { [option]: 0 } }), new RegExp(option.replace(/\./g, '\\.')), option);
  }
});

t.test('the collector starts a pass every gc.intervalSecs and a deep round every gc.deepIntervalSecs on the clock', async (t) => {
  const clock = steppedClock(new Date());
  const kiln = await startTestKiln(t, { 'gc.intervalSecs': 100, 'gc.deepIntervalSecs': 250, 'gc.deepPaceMs': 0 }, { clock, gcLoop: true });
  const runs = async () => {
    const rows = await kiln.sql<{ kind: string; n: number }[]>`select kind, count(*)::int as n from gc_runs where state = 'finished' group by kind`;
    return Object.fromEntries(rows.map((r) => [r.kind, r.n]));
  };
  const waitForPasses = (n: number) => eventually(`${n} passes`, async () => {
    const r = await runs();
    return (r['pass'] ?? 0) >= n ? r : undefined;
  });
  clock.step(100 * SECOND);
  t.same(await waitForPasses(1), { pass: 1 }, 'gc.intervalSecs passed: a pass, no deep round yet');
  clock.step(100 * SECOND);
  t.same(await waitForPasses(2), { pass: 2 }, 'another interval after the last pass ended: the next pass');
  clock.step(100 * SECOND);
  // The deep round follows the pass in the same look, so it has ended once the fourth pass has.
  await waitForPasses(3);
  clock.step(100 * SECOND);
  t.same(await waitForPasses(4), { pass: 4, deep: 1 }, 'gc.deepIntervalSecs passed: a deep round');
});

t.test('gc.deepIntervalSecs 0: passes, but no background deep round', async (t) => {
  const clock = steppedClock(new Date());
  const kiln = await startTestKiln(t, { 'gc.intervalSecs': 100, 'gc.deepIntervalSecs': 0 }, { clock, gcLoop: true });
  const count = async (kind: string, state = '%') => (await kiln.sql<{ n: number }[]>`
    select count(*)::int as n from gc_runs where kind = ${kind} and state like ${state}`)[0]!.n;
  for (const n of [1, 2]) {
    clock.step(30 * 86_400 * SECOND);
    // Finished before the next step: the next pass is due an interval after this one ends.
    await eventually(`pass ${n}`, async () => ((await count('pass', 'finished')) >= n ? true : undefined));
  }
  // Looks never overlap: the deep round was considered after the first pass, before the second began.
  t.equal(await count('deep'), 0, 'no deep round however long it has been');
});
