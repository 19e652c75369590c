import t from 'tap';
import { CoalescingLoop } from '../../supervisors/index.js';

// A pass the test finishes by hand, so that wakes land while one is under way.
function heldPasses(fail: (n: number) => boolean = () => false) {
  let started = 0;
  let inside = 0;
  let mostAtOnce = 0;
  const releases: (() => void)[] = [];
  const errors: unknown[] = [];
  const loop = new CoalescingLoop(async () => {
    const n = ++started;
    inside++;
    mostAtOnce = Math.max(mostAtOnce, inside);
    await new Promise<void>((resolve) => releases.push(resolve));
    inside--;
    if (fail(n)) throw new Error(`pass ${n} failed`);
  }, (error) => errors.push(error));
  /** Lets the running pass end, then waits for the next one to start (or for the loop to go idle). */
  const release = async () => {
    releases.shift()?.();
    for (let i = 0; i < 10 && releases.length === 0; i++) await Promise.resolve();
  };
  return { loop, release, errors, get started() { return started; }, get mostAtOnce() { return mostAtOnce; } };
}

t.test('a wake while idle runs one pass at once', async (t) => {
  const h = heldPasses();
  h.loop.wake();
  t.equal(h.started, 1);
  await h.release();
  await h.loop.settle();
  t.equal(h.started, 1, 'nothing more without another wake');
});

t.test('a wake during a pass runs exactly one more pass after it, never two at once', async (t) => {
  const h = heldPasses();
  h.loop.wake();
  h.loop.wake();
  t.equal(h.started, 1, 'the second pass waits for the first');
  await h.release();
  t.equal(h.started, 2);
  await h.release();
  await h.loop.settle();
  t.equal(h.started, 2);
  t.equal(h.mostAtOnce, 1);
});

t.test('many wakes during a pass coalesce into one more pass', async (t) => {
  const h = heldPasses();
  h.loop.wake();
  for (let i = 0; i < 50; i++) h.loop.wake();
  await h.release();
  await h.release();
  await h.loop.settle();
  t.equal(h.started, 2);
});

t.test('a wake from the synchronous start of a pass does not start a second one', async (t) => {
  let inside = 0;
  let mostAtOnce = 0;
  let passes = 0;
  const loop: CoalescingLoop = new CoalescingLoop(async () => {
    passes++;
    inside++;
    mostAtOnce = Math.max(mostAtOnce, inside);
    if (passes === 1) loop.wake();
    await Promise.resolve();
    inside--;
  }, () => undefined);
  loop.wake();
  await loop.settle();
  t.equal(passes, 2, 'the wake ran one more pass after');
  t.equal(mostAtOnce, 1);
});

t.test('settle waits for the pass woken during the running one', async (t) => {
  const h = heldPasses();
  h.loop.wake();
  h.loop.wake();
  let settled = false;
  const settling = h.loop.settle().then(() => (settled = true));
  await h.release();
  t.equal(settled, false, 'the second pass still runs');
  await h.release();
  await settling;
  t.equal(h.started, 2);
});

t.test('stop waits for the running pass and runs none after, even one already woken', async (t) => {
  const h = heldPasses();
  h.loop.wake();
  h.loop.wake();
  let stopped = false;
  const stopping = h.loop.stop().then(() => (stopped = true));
  await Promise.resolve();
  t.equal(stopped, false, 'the pass is still running');
  await h.release();
  await stopping;
  t.equal(h.started, 1);
  h.loop.wake();
  t.equal(h.started, 1, 'a stopped loop ignores wakes');
});

t.test('a failed pass goes to onError and later passes still run', async (t) => {
  const h = heldPasses((n) => n === 1);
  h.loop.wake();
  h.loop.wake();
  await h.release();
  t.equal(h.started, 2, 'the pass woken during the failed one runs');
  await h.release();
  await h.loop.settle();
  t.match(h.errors, [/pass 1 failed/]);
  h.loop.wake();
  t.equal(h.started, 3, 'a later wake runs a pass');
  await h.release();
  await h.loop.settle();
  t.equal(h.errors.length, 1);
});

t.test('inspect shows the state, the passes run and the last error, for the actors tree', async (t) => {
  const h = heldPasses((n) => n === 1);
  t.same(h.loop.inspect(), { state: 'idle', status: 'running', mailbox: 0, summary: { passes: 0 } });
  h.loop.wake();
  t.equal(h.loop.inspect().state, 'running');
  h.loop.wake();
  t.same(h.loop.inspect(), { state: 'running-with-another-pass-pending', status: 'running', mailbox: 1, summary: { passes: 0 } });
  await h.release();
  t.same(h.loop.inspect(), { state: 'running', status: 'running', mailbox: 0, summary: { passes: 1 }, error: 'pass 1 failed' });
  await h.release();
  await h.loop.settle();
  t.same(h.loop.inspect(), { state: 'idle', status: 'running', mailbox: 0, summary: { passes: 2 }, error: 'pass 1 failed' });
  await h.loop.stop();
  t.same(h.loop.inspect(), { state: 'stopped', status: 'stopped', mailbox: 0, summary: { passes: 2 }, error: 'pass 1 failed' });
});
