// Memory at rest (docs/http.md, "Memory at rest: the start-up's young generation"): the young
// generation an allocation burst grew goes back to its smallest, by shrinkHeapAtRest and at the end
// of a kiln's start-up.
import { getHeapSpaceStatistics } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Worker } from 'node:worker_threads';
import t from 'tap';
import { shrinkHeapAtRest, watchHeapAtRest } from '../../storage/index.js';
import { eventually } from '../support/eventually.js';
import { startTestKiln } from '../support/kiln.js';

const MiB = 1024 * 1024;
const youngGeneration = () => getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')!.space_size;

/** What loading ~1,000 modules does to the young generation: objects that live across a few scavenges. */
function allocationBurst(): void {
  let kept: { i: number; s: string }[][] = [];
  for (let round = 0; round < 40; round++) {
    kept.push(Array.from({ length: 50_000 }, (_, i) => ({ i, s: `x${i}` })));
    if (kept.length > 8) kept.shift();
  }
  kept = [];
}

t.test('shrinkHeapAtRest gives back the young generation a burst grew', async (t) => {
  allocationBurst();
  t.ok(youngGeneration() > 4 * MiB, `the burst grew it (${youngGeneration() / MiB} MiB)`);
  shrinkHeapAtRest();
  t.ok(youngGeneration() <= 2 * MiB, `back to ${youngGeneration() / MiB} MiB`);
  allocationBurst();
  t.ok(youngGeneration() > 4 * MiB, 'V8 grows it again under the next burst');
});

t.test('watchHeapAtRest shrinks it once a burst is over, not while it lasts', async (t) => {
  shrinkHeapAtRest();
  let shrinks = 0;
  const stop = watchHeapAtRest({ intervalMs: 20, minGapMs: 0, shrunk: () => shrinks++ });
  t.teardown(stop);
  // while the burst allocates (~1 MiB between two looks at least) the watch leaves it grown
  let kept: { i: number; s: string }[][] = [];
  for (let round = 0; round < 120; round++) {
    kept.push(Array.from({ length: 50_000 }, (_, i) => ({ i, s: `x${i}` })));
    if (kept.length > 8) kept.shift();
    // the watch's timer runs between the burst's steps
    if (round % 4 === 0) await new Promise((resolve) => setImmediate(resolve));
  }
  t.ok(youngGeneration() > 4 * MiB, `grown at the burst's end (${youngGeneration() / MiB} MiB)`);
  t.equal(shrinks, 0, 'not shrunk while the burst lasted');
  kept = [];
  await eventually(() => youngGeneration() <= 2 * MiB, { message: 'the young generation shrinks once at rest' });
  t.equal(shrinks, 1, `shrunk once at rest: ${youngGeneration() / MiB} MiB`);
});

t.test('a kiln ends its start-up with the young generation at its smallest', async (t) => {
  allocationBurst();
  t.ok(youngGeneration() > 4 * MiB, `grown before the start (${youngGeneration() / MiB} MiB)`);
  // on by default; the test support turns it off for the other tests' kilns
  await startTestKiln(t, {}, { shrinkHeapAtRest: true });
  t.ok(youngGeneration() <= 2 * MiB, `after the start: ${youngGeneration() / MiB} MiB`);
});

t.test('threads that shrink at once all get the collector, and none fails', async (t) => {
  // --expose-gc is the process's flag: one thread turning it off again between another's setting it
  // and making its context left that one without `gc`, and the throw ended a serving thread (CI's
  // connection resets on a server with http.threads 2, as both threads shrink right after listening).
  const THREADS = 6;
  const gate = new Int32Array(new SharedArrayBuffer(4));
  const module = new URL('../../storage/restingHeap.ts', import.meta.url).href;
  const code = `
    const { workerData, parentPort } = require('node:worker_threads');
    import(workerData.module).then(({ shrinkHeapAtRest }) => {
      const gate = new Int32Array(workerData.gate);
      Atomics.add(gate, 0, 1);
      while (Atomics.load(gate, 0) < workerData.threads) {}
      try { parentPort.postMessage(shrinkHeapAtRest() ? 'shrunk' : 'no collector'); }
      catch (error) { parentPort.postMessage('threw: ' + error.message); }
    });`;
  const outcomes = await Promise.all(Array.from({ length: THREADS }, () => new Promise<string>((resolve, reject) => {
    const worker = new Worker(code, { eval: true, workerData: { module, gate: gate.buffer, threads: THREADS } });
    worker.once('message', (m: string) => {
      resolve(m);
      void worker.terminate();
    });
    worker.once('error', reject);
  })));
  t.same(outcomes, Array<string>(THREADS).fill('shrunk'));
});

t.test('no gc function is left to contexts made after a shrink', async (t) => {
  shrinkHeapAtRest();
  t.equal(runInNewContext('typeof gc'), 'undefined');
});

t.test('a second shrink waits out minGapMs, on the clock given', async (t) => {
  let clock = 0;
  let shrinks = 0;
  const stop = watchHeapAtRest({ intervalMs: 20, minGapMs: 60_000, now: () => clock, shrunk: () => shrinks++ });
  t.teardown(stop);
  allocationBurst();
  await eventually(() => shrinks === 1, { message: 'the first shrink at rest' });
  allocationBurst();
  t.ok(youngGeneration() > 4 * MiB, 'grown again');
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.equal(shrinks, 1, 'at rest again within the gap: not shrunk');
  clock += 60_000;
  await eventually(() => shrinks === 2, { message: 'shrunk once the gap is over' });
  t.pass('shrunk again after the gap');
});

t.test('a young generation V8 keeps at a few MiB under light work is left alone, and the once-per-gap shrink kept for a burst (h53)', async (t) => {
  shrinkHeapAtRest();
  let shrinks = 0;
  const stop = watchHeapAtRest({ intervalMs: 20, shrunk: () => shrinks++ });
  t.teardown(stop);
  // light work: one step of a burst grows it to 8 MiB at most
  let kept: { i: number; s: string }[] | null = Array.from({ length: 50_000 }, (_, i) => ({ i, s: `x${i}` }));
  kept = null;
  t.ok(kept === null && youngGeneration() <= 8 * MiB, `a few MiB (${youngGeneration() / MiB} MiB)`);
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.equal(shrinks, 0, 'at rest at a few MiB: not shrunk');
  allocationBurst();
  t.ok(youngGeneration() > 8 * MiB, `a burst grew it (${youngGeneration() / MiB} MiB)`);
  await eventually(() => shrinks === 1, { message: "the burst's young generation shrinks at rest, within the default gap" });
  t.ok(youngGeneration() <= 2 * MiB, `back to ${youngGeneration() / MiB} MiB`);
});
