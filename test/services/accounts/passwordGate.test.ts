import t from 'tap';
import { PasswordGate } from '../../../services/index.js';

// The gate's bound, checked with work the test releases by hand: which task runs is decided by
// the gate alone, so no timing is involved.

function deferred(): { promise: Promise<string>; resolve(v: string): void; reject(e: Error): void } {
  let resolve!: (v: string) => void;
  let reject!: (e: Error) => void;
  const promise = new Promise<string>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

const settle = () => new Promise((r) => setImmediate(r));

t.test('at most cap run at once; the rest wait in arrival order; a full queue is refused with 503 password_busy', async (t) => {
  const gate = new PasswordGate(1, 2);
  const started: string[] = [];
  const work = ['a', 'b', 'c'].map((name) => ({ name, d: deferred() }));
  const runs = work.map(({ name, d }) => gate.run(() => (started.push(name), d.promise)));
  await settle();
  t.same(started, ['a'], 'one at a time');
  t.match(gate.stats(), { inFlight: 1, waiting: 2, refused: 0 });
  await t.rejects(gate.run(async () => 'd'), { status: 503, code: 'password_busy', message: /too many password checks/ });
  t.equal(gate.stats().refused, 1);
  work[0]!.d.resolve('A');
  t.equal(await runs[0], 'A');
  await settle();
  t.same(started, ['a', 'b'], 'the slot goes to the first in line');
  work[1]!.d.reject(new Error('argon2 failed'));
  await t.rejects(runs[1]!, /argon2 failed/);
  await settle();
  t.same(started, ['a', 'b', 'c'], 'a failed hash frees its slot too');
  work[2]!.d.resolve('C');
  t.equal(await runs[2], 'C');
  t.match(gate.stats(), { inFlight: 0, waiting: 0, peakInFlight: 1, refused: 1 });
});

t.test('cap 2 runs two at once, never three', async (t) => {
  const gate = new PasswordGate(2, 10);
  const ds = Array.from({ length: 5 }, deferred);
  let running = 0;
  let most = 0;
  const runs = ds.map((d) => gate.run(async () => {
    most = Math.max(most, ++running);
    try {
      return await d.promise;
    } finally {
      running--;
    }
  }));
  for (const d of ds) {
    await settle();
    d.resolve('ok');
  }
  await Promise.all(runs);
  t.equal(most, 2);
  t.equal(gate.stats().peakInFlight, 2);
});

t.test('a gate without room is a programming error', (t) => {
  t.throws(() => new PasswordGate(0, 1), /cap >= 1/);
  t.end();
});
