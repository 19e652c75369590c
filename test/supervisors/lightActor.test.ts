// Light actors (supervisors/lightActor.ts) keep the rules of docs/supervision.md: a node in the
// tree, a transition per step on the feed, a final state leaves the tree, a throwing step is a
// crash against the restart budget (restart from rehydrate or the initial state, waiting events
// delivered after), and the job actor (actors/workerJob.ts) ends exactly once.
import t from 'tap';
import { createRootSupervisor, type ActorTransition } from '../../supervisors/index.js';
import { workerJobMachine, summarizeWorkerJob } from '../../actors/index.js';

type State = 'counting' | 'finished';
type Event = { type: 'inc' } | { type: 'boom' } | { type: 'finish' };
const counter = {
  initial: 'counting' as State,
  final: new Set<State>(['finished']) as ReadonlySet<State>,
  context: (input: { start: number }) => ({ count: input.start }),
  step(state: State, context: { count: number }, event: Event) {
    if (state !== 'counting') return null;
    if (event.type === 'boom') throw new Error('counter exploded');
    if (event.type === 'inc') return { state, context: { count: context.count + 1 } };
    return { state: 'finished' as State, context };
  },
};

function tree(t: { teardown(fn: () => void): void }, maxRestarts = 5) {
  const escalations: unknown[] = [];
  const root = createRootSupervisor({ restartBudget: { maxRestarts, withinMs: 10_000 }, now: () => 0, onEscalate: (e) => escalations.push(e) });
  t.teardown(() => root.stop());
  const feed: ActorTransition[] = [];
  root.onTransition((tr) => feed.push(tr));
  return { root, escalations, feed };
}

t.test('a light actor steps, shows in the tree and on the feed, and leaves on a final state', async (t) => {
  const { root, feed } = tree(t);
  const actor = root.spawnLight({ id: 'c1', kind: 'counter', machine: counter, input: { start: 5 }, summarize: (_s, c) => ({ count: c.count }) });
  actor.send({ type: 'inc' });
  t.equal(actor.context.count, 6);
  t.match(root.inspect().children, [{ id: 'c1', kind: 'counter', state: 'counting', status: 'running', restarts: 0, mailbox: 0, summary: { count: 6 } }]);
  t.same(feed.map((f) => `${f.id}:${f.event}:${f.state}`), ['c1:xstate.init:counting', 'c1:inc:counting']);
  t.throws(() => root.spawnLight({ id: 'c1', kind: 'counter', machine: counter, input: { start: 0 } }), /already in use/);
  actor.send({ type: 'finish' });
  t.equal(actor.status, 'done');
  t.same(root.inspect().children, [], 'a final state leaves the tree');
  actor.send({ type: 'inc' });
  t.equal(actor.context.count, 6, 'events after the end are dropped');
  root.spawnLight({ id: 'c1', kind: 'counter', machine: counter, input: { start: 0 } }); // the id is free again
});

t.test('a throwing step is a crash: restart from the initial state (or rehydrate), waiting events after; a spent budget escalates', async (t) => {
  const { root, escalations } = tree(t, 1);
  const actor = root.spawnLight({ id: 'c2', kind: 'counter', machine: counter, input: { start: 5 } });
  actor.send({ type: 'inc' });
  actor.send({ type: 'boom' });
  actor.send({ type: 'inc' });
  t.match(root.inspect().children, [{ id: 'c2', status: 'restarting', mailbox: 1, error: 'counter exploded' }]);
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(actor.status, 'running');
  t.equal(actor.context.count, 6, 'restarted at input 5, then the waiting inc');
  t.match(root.inspect().children, [{ id: 'c2', restarts: 1, mailbox: 0 }]);
  actor.send({ type: 'boom' });
  t.equal(escalations.length, 1, 'the second crash within the window spends the budget of one');

  const other = tree(t);
  const gone = other.root.spawnLight({ id: 'j', kind: 'counter', machine: counter, input: { start: 0 }, rehydrate: () => null });
  gone.send({ type: 'boom' });
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(gone.status, 'done', 'rehydrate null: it leaves the tree');
  t.same(other.root.inspect().children, []);
});

t.test('the job actor ends once: a result after a loss, or a second result, is not taken', async (t) => {
  const { root } = tree(t);
  const input = { kind: 'build' as const, jobId: 'build:x:1', workerId: 'w', subject: 'x', attempt: 1, dispatchedAt: 0 };
  const job = root.spawnLight({ id: input.jobId, kind: 'build-job', machine: workerJobMachine, input, summarize: summarizeWorkerJob });
  t.ok(job.can({ type: 'accepted' }));
  job.send({ type: 'progress', amount: 16 });
  t.match(root.inspect().children, [{ kind: 'build-job', state: 'running', summary: { kind: 'build', attempt: 1, progress: 16 } }]);
  t.ok(job.can({ type: 'refused' }), 'a running job can be given back (a build whose inputs the worker\'s store cannot let go of yet)');
  t.ok(job.can({ type: 'lost' }));
  job.send({ type: 'lost' });
  t.equal(job.state, 'lost');
  t.notOk(job.can({ type: 'succeeded' }), 'no result after the loss');
  t.same(root.inspect().children, []);
  const failed = root.spawnLight({ id: 'build:y:1', kind: 'build-job', machine: workerJobMachine, input: { ...input, jobId: 'build:y:1' } });
  failed.send({ type: 'failed', reason: 'boom' });
  t.match(failed.context, { failure: 'boom' });
  t.notOk(failed.can({ type: 'failed', reason: 'again' }));
});
