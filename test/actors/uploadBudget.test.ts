import t from 'tap';
import { createActor, initialTransition, transition } from 'xstate';
import {
  acquireUpload,
  summarizeUploadBudget,
  uploadBudgetMachine,
  type UploadBudgetInput,
  type UploadPermit,
} from '../../actors/index.js';
import { createRootSupervisor } from '../../supervisors/index.js';

const MiB = 1_048_576;

function budget(t: { teardown(fn: () => void): void }, input: UploadBudgetInput) {
  const actor = createActor(uploadBudgetMachine, { input }).start();
  t.teardown(() => actor.stop());
  return {
    actor,
    /** Sizes of the requests that wait, in arrival order. */
    waiting: () => actor.getSnapshot().context.waiting.map((r) => r.bytes),
    /** Sizes of the permits held, in grant order. */
    granted: () => actor.getSnapshot().context.granted.map((r) => r.bytes),
    state: () => actor.getSnapshot().value,
  };
}

t.test('machine: the states name the ledger, and every event is idempotent by id', async (t) => {
  const input = { concurrency: 1, bytesBudget: 10 * MiB };
  let [snapshot] = initialTransition(uploadBudgetMachine, input);
  t.equal(snapshot.value, 'idle');
  t.same(snapshot.context.limits, { concurrency: 1, bytesBudget: 10 * MiB, smallWindow: 128, smallBytes: MiB });

  [snapshot] = transition(uploadBudgetMachine, snapshot, { type: 'upload.request', id: 'a', bytes: 2 * MiB });
  t.equal(snapshot.value, 'admitting');
  [snapshot] = transition(uploadBudgetMachine, snapshot, { type: 'upload.request', id: 'a', bytes: 2 * MiB });
  t.same(snapshot.context.granted, [{ id: 'a', bytes: 2 * MiB }], 'a repeated request changes nothing');
  [snapshot] = transition(uploadBudgetMachine, snapshot, { type: 'upload.request', id: 'b', bytes: 3 * MiB });
  t.equal(snapshot.value, 'saturated');
  t.same(snapshot.context.waiting, [{ id: 'b', bytes: 3 * MiB }]);

  [snapshot] = transition(uploadBudgetMachine, snapshot, { type: 'upload.release', id: 'nobody' });
  t.equal(snapshot.value, 'saturated', 'an unknown release changes nothing');
  [snapshot] = transition(uploadBudgetMachine, snapshot, { type: 'upload.release', id: 'a' });
  t.equal(snapshot.value, 'admitting');
  t.same(snapshot.context.granted, [{ id: 'b', bytes: 3 * MiB }]);
  [snapshot] = transition(uploadBudgetMachine, snapshot, { type: 'upload.cancel', id: 'b' });
  t.equal(snapshot.value, 'idle', 'cancelling a granted request gives the permit back');

  // A restored permit counts even past the window: that upload is already running.
  [snapshot] = transition(uploadBudgetMachine, snapshot, { type: 'upload.request', id: 'c', bytes: 2 * MiB });
  [snapshot] = transition(uploadBudgetMachine, snapshot, { type: 'upload.restore', id: 'd', bytes: 2 * MiB });
  [snapshot] = transition(uploadBudgetMachine, snapshot, { type: 'upload.restore', id: 'd', bytes: 2 * MiB });
  t.same(snapshot.context.granted.map((r) => r.id), ['c', 'd']);
  t.same(summarizeUploadBudget(snapshot), {
    waiting: 0,
    largeInFlight: 2,
    smallInFlight: 0,
    bytesInFlight: 4 * MiB,
    concurrency: 1,
    smallWindow: 128,
    bytesBudget: 10 * MiB,
  });
});

t.test('machine: bad limits fail with the field named', async (t) => {
  // xstate turns a throw in the context factory into an error snapshot; a supervisor escalates it.
  const [zero] = initialTransition(uploadBudgetMachine, { concurrency: 0, bytesBudget: 1 });
  t.match(zero, { status: 'error', error: { message: /^UploadBudget concurrency: / } });
  const [fraction] = initialTransition(uploadBudgetMachine, { concurrency: 1, bytesBudget: 1.5 });
  t.match(fraction, { status: 'error', error: { message: /^UploadBudget bytesBudget: / } });
});

t.test('upload.concurrency caps large uploads at once', async (t) => {
  const b = budget(t, { concurrency: 2, bytesBudget: 100 * MiB });
  const first = await acquireUpload(b.actor, { bytes: 2 * MiB });
  await acquireUpload(b.actor, { bytes: 3 * MiB });
  const third = acquireUpload(b.actor, { bytes: 4 * MiB });
  t.same(b.waiting(), [4 * MiB]);
  t.equal(b.state(), 'saturated');
  first.release();
  t.equal((await third).bytes, 4 * MiB);
  t.same(b.granted(), [3 * MiB, 4 * MiB]);
});

t.test('small uploads have their own window, independent of the large one', async (t) => {
  const b = budget(t, { concurrency: 1, bytesBudget: 100 * MiB, smallWindow: 2 });
  const large = await acquireUpload(b.actor, { bytes: 2 * MiB });
  const secondLarge = acquireUpload(b.actor, { bytes: 3 * MiB });
  const small = await acquireUpload(b.actor, { bytes: MiB }); // exactly 1 MiB is small
  await acquireUpload(b.actor, { bytes: 10 });
  const thirdSmall = acquireUpload(b.actor, { bytes: 20 });
  t.same(b.waiting(), [3 * MiB, 20], 'a full large window does not hold back small uploads');
  small.release();
  t.equal((await thirdSmall).bytes, 20);
  t.same(b.waiting(), [3 * MiB], 'a free small slot does not admit a large upload');
  large.release();
  t.equal((await secondLarge).bytes, 3 * MiB);
});

t.test('upload.bytesBudget caps the bytes of admitted uploads, small and large together', async (t) => {
  const b = budget(t, { concurrency: 8, bytesBudget: 10 * MiB });
  const six = await acquireUpload(b.actor, { bytes: 6 * MiB });
  const tiny = await acquireUpload(b.actor, { bytes: MiB });
  const five = acquireUpload(b.actor, { bytes: 5 * MiB });
  t.same(b.waiting(), [5 * MiB]);
  tiny.release();
  t.same(b.waiting(), [5 * MiB], '6 + 5 MiB is still over the budget');
  six.release();
  t.equal((await five).bytes, 5 * MiB);
});

t.test('an upload larger than the budget runs alone once nothing else is in flight', async (t) => {
  const b = budget(t, { concurrency: 8, bytesBudget: 4 * MiB });
  const small = await acquireUpload(b.actor, { bytes: MiB });
  const huge = acquireUpload(b.actor, { bytes: 10 * MiB });
  const later = acquireUpload(b.actor, { bytes: 100 });
  t.same(b.waiting(), [10 * MiB, 100], 'the later small one does not pass the waiting huge one');
  small.release();
  const hugePermit = await huge;
  t.same(b.granted(), [10 * MiB]);
  t.same(b.waiting(), [100], 'nothing runs beside it');
  hugePermit.release();
  t.equal((await later).bytes, 100);
});

t.test('FIFO: a stream of small uploads cannot starve a large one waiting for bytes', async (t) => {
  const b = budget(t, { concurrency: 8, bytesBudget: 4 * MiB });
  const KiB512 = MiB / 2;
  const smalls = [];
  for (let i = 0; i < 3; i++) smalls.push(await acquireUpload(b.actor, { bytes: MiB }));
  const large = acquireUpload(b.actor, { bytes: 2 * MiB });
  const stream = Array.from({ length: 5 }, () => acquireUpload(b.actor, { bytes: KiB512 }));
  t.same(b.waiting(), [2 * MiB, ...Array(5).fill(KiB512)], 'the free MiB is not given to small uploads that came later');
  smalls[0]!.release();
  const largePermit = await large;
  t.same(b.granted(), [MiB, MiB, 2 * MiB]);
  t.same(b.waiting(), Array(5).fill(KiB512));
  largePermit.release();
  smalls[1]!.release();
  smalls[2]!.release();
  t.equal((await Promise.all(stream)).length, 5);
  t.same(b.waiting(), []);
});

t.test('a waiter that gives up leaves the queue cleanly', async (t) => {
  const b = budget(t, { concurrency: 1, bytesBudget: 100 * MiB });
  const held = await acquireUpload(b.actor, { bytes: 2 * MiB });
  const controller = new AbortController();
  const givesUp = acquireUpload(b.actor, { bytes: 3 * MiB, signal: controller.signal });
  const next = acquireUpload(b.actor, { bytes: 4 * MiB });
  t.same(b.waiting(), [3 * MiB, 4 * MiB]);
  const timeout = new DOMException('no permit within upload.restWaitSecs', 'TimeoutError');
  controller.abort(timeout);
  await t.rejects(givesUp, timeout, 'rejects with the signal reason, which the REST route turns into 503');
  t.same(b.waiting(), [4 * MiB]);
  held.release();
  t.equal((await next).bytes, 4 * MiB, 'the permit goes to the next waiter, not to the one that left');

  const aborted = AbortSignal.abort(new Error('client went away'));
  await t.rejects(acquireUpload(b.actor, { bytes: 1, signal: aborted }), { message: 'client went away' });
  t.same(b.waiting(), [], 'an already aborted signal sends nothing');
});

t.test('aborting after the grant changes nothing; the permit stays held', async (t) => {
  const b = budget(t, { concurrency: 1, bytesBudget: 100 * MiB });
  const controller = new AbortController();
  const permit = await acquireUpload(b.actor, { bytes: 2 * MiB, signal: controller.signal });
  controller.abort();
  t.same(b.granted(), [2 * MiB]);
  permit.release();
  t.same(b.granted(), []);
});

t.test('release() is idempotent', async (t) => {
  const b = budget(t, { concurrency: 1, bytesBudget: 100 * MiB });
  const first = await acquireUpload(b.actor, { bytes: 2 * MiB });
  const second = acquireUpload(b.actor, { bytes: 3 * MiB });
  acquireUpload(b.actor, { bytes: 4 * MiB }).catch(() => {});
  first.release();
  first.release();
  t.equal((await second).bytes, 3 * MiB);
  t.same(b.waiting(), [4 * MiB], 'the second release did not free a second slot');
});

t.test('bad sizes are refused with the field named', async (t) => {
  const b = budget(t, { concurrency: 1, bytesBudget: MiB });
  await t.rejects(acquireUpload(b.actor, { bytes: -1 }), new RangeError('acquireUpload bytes: expected a byte count (an integer >= 0), got -1'));
  await t.rejects(acquireUpload(b.actor, { bytes: 1.5 }), RangeError);
});

t.test('behind a supervisor: a restarted budget is told again what is held and what waits', async (t) => {
  // The real machine never throws; this variant crashes on a request with id "crash".
  const crashable = uploadBudgetMachine.provide({
    guards: {
      someoneWaits: ({ context }) => {
        if (context.waiting.some((r) => r.id === 'crash')) throw new Error('budget crashed');
        return context.waiting.length > 0;
      },
    },
  });
  const root = createRootSupervisor({ onEscalate: (error) => t.fail(error.message) });
  t.teardown(() => root.stop());
  const handle = root.spawn({
    id: 'upload-budget',
    kind: 'upload-budget',
    logic: crashable,
    input: { concurrency: 1, bytesBudget: 100 * MiB },
    summarize: summarizeUploadBudget,
  });
  const held = await acquireUpload(handle, { bytes: 2 * MiB });
  const waiting = acquireUpload(handle, { bytes: 3 * MiB });
  const restarted = new Promise<void>((resolve) =>
    root.onTransition((tr) => tr.event === 'xstate.init' && resolve()),
  );
  handle.send({ type: 'upload.request', id: 'crash', bytes: 5 * MiB }); // waits, so the guard sees it
  await restarted;
  t.same(handle.getSnapshot().context.granted.map((r) => r.bytes), [2 * MiB], 'the held permit is counted again');
  t.same(handle.getSnapshot().context.waiting.map((r) => r.bytes), [3 * MiB], 'the waiter is queued again');
  t.match(root.inspect().children[0], {
    id: 'upload-budget',
    kind: 'upload-budget',
    state: 'saturated',
    restarts: 1,
    summary: { waiting: 1, largeInFlight: 1, bytesInFlight: 2 * MiB },
  });
  held.release();
  const permit: UploadPermit = await waiting;
  t.equal(permit.bytes, 3 * MiB);

  const orphan = acquireUpload(handle, { bytes: 4 * MiB });
  root.stop();
  await t.rejects(orphan, { message: 'the upload budget actor has stopped' });
  await t.rejects(acquireUpload(handle, { bytes: 1 }), { message: 'the upload budget actor has stopped' });
});

t.test('fairness: one owner never takes every permit, and permits given back go to owners under their share', async (t) => {
  const b = budget(t, { concurrency: 4, bytesBudget: 1000 * MiB });
  const ask = (id: string, owner: string) => b.actor.send({ type: 'upload.request', id, bytes: 2 * MiB, owner });
  const holders = () => b.actor.getSnapshot().context.granted.map((r) => r.owner);
  for (let i = 0; i < 6; i++) ask(`a${i}`, 'ada');
  t.same(holders(), ['ada', 'ada', 'ada'], 'alone, an owner holds at most 3 of 4: one stays free for a newcomer');
  ask('b0', 'bob');
  t.same(holders(), ['ada', 'ada', 'ada', 'bob'], 'a newcomer is admitted at once');
  ask('c0', 'cat');
  t.equal(b.waiting().length, 4, 'the window is full: cat waits with ada');
  b.actor.send({ type: 'upload.release', id: 'a0' });
  t.same(holders(), ['ada', 'ada', 'bob', 'cat'], "the permit ada gave back goes to cat, under its share, not to ada's earlier waiters");
  b.actor.send({ type: 'upload.release', id: 'b0' });
  t.same(holders(), ['ada', 'ada', 'cat', 'ada'], 'with nobody else under its share waiting, ada may take it');
  b.actor.send({ type: 'upload.request', id: 'c1', bytes: 2 * MiB, owner: 'cat' });
  b.actor.send({ type: 'upload.release', id: 'a1' });
  t.same(holders(), ['ada', 'cat', 'ada', 'cat'], 'two owners waiting: each gets up to half');
  b.actor.send({ type: 'upload.request', id: 'n0', bytes: 2 * MiB });
  b.actor.send({ type: 'upload.release', id: 'c0' });
  t.same(holders(), ['ada', 'ada', 'cat', 'ada'], 'arrival order among those who may be granted: ada asked before the server');
  b.actor.send({ type: 'upload.release', id: 'c1' });
  t.same(holders(), ['ada', 'ada', 'ada', undefined], "ada is at its cap and waits; the server's own upload (no owner) is not capped");
});

t.test('fairness in the facade: the owner travels with the request and with a restored permit', async (t) => {
  const b = budget(t, { concurrency: 2, bytesBudget: 1000 * MiB });
  const held = await acquireUpload(b.actor, { bytes: 2 * MiB, owner: 'ada' });
  const second = acquireUpload(b.actor, { bytes: 2 * MiB, owner: 'ada' });
  t.same(b.waiting(), [2 * MiB], 'alone, ada holds 1 of 2');
  const bob = await acquireUpload(b.actor, { bytes: 2 * MiB, owner: 'bob' });
  t.same(b.actor.getSnapshot().context.granted.map((r) => r.owner), ['ada', 'bob']);
  held.release();
  t.equal((await second).bytes, 2 * MiB);
  bob.release();
});
