// The bounded wait the suite relies on: it resolves as soon as the condition holds, and fails with
// the message and the last value instead of hanging. A tap timeout per test keeps a broken helper
// from taking 300 s to show.
import t from 'tap';
import { eventually, EventuallyTimeout, quietFor, within } from './eventually.js';

const bounded = { timeout: 10_000 };

t.test('resolves with the first truthy value, long before the timeout', bounded, async (t) => {
  const values = [0, '', null, 'ready', 'later'];
  let reads = 0;
  t.equal(await eventually(() => values[reads++], { timeout: 60_000, interval: 1 }), 'ready');
  t.equal(reads, 4, 'no read after the one that held');
});

t.test('with `until`, resolves with the first value it accepts; an async read is awaited', bounded, async (t) => {
  const phases = ['queued', 'building', 'completed', 'gone'];
  let reads = 0;
  const build = await eventually(async () => ({ status: phases[reads++] }), { until: (b) => b.status === 'completed', timeout: 60_000, interval: 1 });
  t.same(build, { status: 'completed' });
  t.equal(reads, 3);
});

t.test('fails after the timeout with the message and the last value read', bounded, async (t) => {
  let reads = 0;
  const failure: unknown = await eventually(() => ({ status: 'started', reads: ++reads }), {
    until: (b) => b.status === 'completed',
    timeout: 100,
    interval: 5,
    message: 'the build completes',
  }).catch((e: unknown) => e);
  t.type(failure, EventuallyTimeout);
  const { message, lastValue } = failure as EventuallyTimeout;
  t.ok(reads > 1, 'it kept reading until the timeout');
  t.same(lastValue, { status: 'started', reads }, 'the last value, not the first');
  t.equal(message, `the build completes: not reached after 100 ms; the last value read was { status: 'started', reads: ${reads} }`);
});

t.test('a read still pending at the timeout fails too', bounded, async (t) => {
  await t.rejects(eventually(() => new Promise<boolean>(() => undefined), { timeout: 50, message: 'the stuck read' }), {
    name: 'EventuallyTimeout',
    message: 'the stuck read: a read was still pending after 50 ms; no read returned',
  });
});

t.test('a read that throws fails at once with its own error', bounded, async (t) => {
  let reads = 0;
  const broken = new Error('relation "builds" does not exist');
  await t.rejects(eventually(() => { reads++; throw broken; }, { timeout: 60_000 }), broken);
  t.equal(reads, 1);
});

t.test('within: an event-driven wait, bounded; the message describes the state at the timeout', bounded, async (t) => {
  t.equal(await within(Promise.resolve('frame'), 60_000, () => 'unused'), 'frame');
  const frames: string[] = [];
  const never = new Promise<void>(() => undefined);
  setImmediate(() => frames.push('user.create'));
  await t.rejects(within(never, 50, () => `2 frames; it has ${JSON.stringify(frames)}`), {
    name: 'EventuallyTimeout',
    message: '2 frames; it has ["user.create"]: not within 50 ms',
  });
  const broken = new Error('socket closed');
  await t.rejects(within(Promise.reject(broken), 60_000, () => 'unused'), broken, 'a rejection passes through');
});

t.test('quietFor lets the named time pass and resolves with nothing', bounded, async (t) => {
  let ticked = false;
  setImmediate(() => (ticked = true));
  t.equal(await quietFor(5), undefined);
  t.ok(ticked, 'the event loop ran meanwhile');
});
