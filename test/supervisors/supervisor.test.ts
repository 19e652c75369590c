import t from 'tap';
import { assign, setup } from 'xstate';
import {
  createRootSupervisor,
  EscalationError,
  type ActorNode,
  type ActorTransition,
  type SupervisorNode,
  type Supervisor,
} from '../../supervisors/index.js';

// A counter that crashes on demand: 'boom' runs an action that throws, which puts the xstate actor
// in its error state, the case supervisors exist for.
const counterMachine = setup({
  types: {
    context: {} as { count: number },
    input: {} as { start: number },
    events: {} as { type: 'inc' } | { type: 'boom' } | { type: 'pause' } | { type: 'finish' },
  },
  actions: {
    explode: () => {
      throw new Error('counter exploded');
    },
  },
}).createMachine({
  id: 'counter',
  context: ({ input }) => {
    if (input.start < 0) throw new Error(`counter start must be >= 0, got ${input.start}`);
    return { count: input.start };
  },
  initial: 'counting',
  states: {
    counting: {
      on: {
        inc: { actions: assign({ count: ({ context }) => context.count + 1 }) },
        boom: { actions: 'explode' },
        pause: 'paused',
        finish: 'finished',
      },
    },
    paused: { on: { boom: { actions: 'explode' }, inc: 'counting' } },
    finished: { type: 'final' },
  },
});

const counterSpec = (id: string, start = 0) => ({
  id,
  kind: 'counter',
  logic: counterMachine,
  input: { start },
  summarize: (snapshot: { context: { count: number } }) => ({ count: snapshot.context.count }),
});

// Fails the test when the root escalates, unless the test says it expects that.
function tree(t: { teardown(fn: () => void): void }, options: { maxRestarts?: number; withinMs?: number; now?: () => number } = {}) {
  const escalations: EscalationError[] = [];
  let notifyEscalation: (error: EscalationError) => void = () => {};
  const root = createRootSupervisor({
    restartBudget: { maxRestarts: options.maxRestarts ?? 5, withinMs: options.withinMs ?? 10_000 },
    now: options.now ?? (() => 0),
    onEscalate: (error) => {
      escalations.push(error);
      notifyEscalation(error);
    },
  });
  t.teardown(() => root.stop());
  const escalated = () => new Promise<EscalationError>((resolve) => (notifyEscalation = resolve));
  return { root, escalations, escalated };
}

/** Resolves with the first transition in the subtree that matches. */
function nextTransition(supervisor: Supervisor, match: (transition: ActorTransition) => boolean): Promise<ActorTransition> {
  return new Promise((resolve) => {
    const off = supervisor.onTransition((transition) => {
      if (!match(transition)) return;
      off();
      resolve(transition);
    });
  });
}

const restarted = (supervisor: Supervisor, id: string) =>
  nextTransition(supervisor, (tr) => tr.id === id && tr.event === 'xstate.init');

const actorNode = (node: SupervisorNode, id: string): ActorNode => {
  const found = node.children.find((child) => child.id === id);
  if (!found || 'children' in found) throw new Error(`no actor ${id} in ${JSON.stringify(node)}`);
  return found;
};

t.test('inspect() shows each actor with kind, state, status, restarts, mailbox and summary', async (t) => {
  const { root } = tree(t);
  const counter = root.spawn(counterSpec('counter-1', 3));
  counter.send({ type: 'inc' });
  const uploads = root.supervise({ id: 'uploads' });
  uploads.spawn(counterSpec('counter-2'));
  uploads.lookup('counter-2', counterMachine)?.send({ type: 'pause' });
  t.same(root.inspect(), {
    id: 'root',
    kind: 'supervisor',
    status: 'running',
    restarts: 0,
    restartBudget: { maxRestarts: 5, withinMs: 10_000, recent: 0 },
    children: [
      { id: 'counter-1', kind: 'counter', state: 'counting', status: 'running', restarts: 0, mailbox: 0, summary: { count: 4 } },
      {
        id: 'uploads',
        kind: 'supervisor',
        status: 'running',
        restarts: 0,
        restartBudget: { maxRestarts: 5, withinMs: 10_000, recent: 0 },
        children: [{ id: 'counter-2', kind: 'counter', state: 'paused', status: 'running', restarts: 0, mailbox: 0, summary: { count: 0 } }],
      },
    ],
  });
  t.equal(JSON.parse(JSON.stringify(root.inspect())).children.length, 2, 'the tree is plain JSON');
});

t.test('an actor that throws is restarted from its initial state with the same input', async (t) => {
  const { root, escalations } = tree(t);
  const counter = root.spawn(counterSpec('counter', 5));
  counter.send({ type: 'inc' });
  t.equal(counter.getSnapshot().context.count, 6);
  const back = restarted(root, 'counter');
  counter.send({ type: 'boom' });
  // Until the restart, events wait for the new incarnation and count as its mailbox.
  counter.send({ type: 'inc' });
  t.match(actorNode(root.inspect(), 'counter'), { status: 'restarting', mailbox: 1, error: 'counter exploded' });
  await back;
  t.equal(counter.getSnapshot().context.count, 6, 'restarted at input 5, then the waiting inc');
  t.equal(counter.incarnation, 2);
  t.match(actorNode(root.inspect(), 'counter'), { status: 'running', restarts: 1, mailbox: 0, state: 'counting' });
  t.same(escalations, []);
});

t.test('rehydrate() decides where a restarted actor resumes, or that it is finished', async (t) => {
  const { root } = tree(t);
  let row: { status: 'counting' | 'paused'; count: number } | null = { status: 'paused', count: 41 };
  const spec = {
    ...counterSpec('build-1'),
    rehydrate: () =>
      row && { input: { start: row.count }, snapshot: counterMachine.resolveState({ value: row.status, context: { count: row.count } }) },
  };
  const counter = root.spawn(spec);
  const back = restarted(root, 'build-1');
  counter.send({ type: 'boom' });
  await back;
  t.equal(counter.getSnapshot().value, 'paused');
  t.equal(counter.getSnapshot().context.count, 41);

  const left = new Promise<void>((resolve) => counter.subscribe({ complete: resolve }));
  row = null;
  counter.send({ type: 'boom' });
  await left;
  t.same(root.inspect().children, [], 'a terminal row leaves the tree');
  t.equal(root.lookup('build-1', counterMachine), undefined);
});

t.test('a failing rehydrate counts against the budget and escalates', async (t) => {
  const { root, escalated } = tree(t, { maxRestarts: 2 });
  root.spawn({ ...counterSpec('flaky'), rehydrate: () => Promise.reject(new Error('database is down')) });
  const escalation = escalated();
  root.lookup('flaky', counterMachine)!.send({ type: 'boom' });
  const error = await escalation;
  t.match(error.message, /gave up: child flaky .*database is down/);
});

t.test('an actor that reaches a final state leaves the tree', async (t) => {
  const { root } = tree(t);
  const counter = root.spawn(counterSpec('once'));
  let completed = false;
  counter.subscribe({ complete: () => (completed = true) });
  counter.send({ type: 'finish' });
  t.equal(completed, true);
  t.same(root.inspect().children, []);
  counter.send({ type: 'inc' }); // dropped, like a message to an exited process
  t.equal(root.lookup('once', counterMachine), undefined);
  root.spawn(counterSpec('once')); // the id is free again
});

t.test('a spent restart budget stops the children and escalates from the root', async (t) => {
  const { root, escalated, escalations } = tree(t, { maxRestarts: 2 });
  const counter = root.spawn(counterSpec('counter'));
  root.spawn(counterSpec('bystander'));
  for (let i = 1; i <= 2; i++) {
    const back = restarted(root, 'counter');
    counter.send({ type: 'boom' });
    await back;
  }
  const escalation = escalated();
  counter.send({ type: 'boom' });
  const error = await escalation;
  t.type(error, EscalationError);
  t.match(error, { supervisor: 'root', child: 'counter', budget: { maxRestarts: 2 } });
  t.match(error.message, 'supervisor root gave up: child counter failed with its restart budget spent (2 restarts within 10000 ms); last error: counter exploded');
  t.equal(escalations.length, 1);
  const node = root.inspect();
  t.match(node, { status: 'halted', error: /gave up/ });
  t.match(actorNode(node, 'counter'), { status: 'restarting', restarts: 2 });
  t.match(actorNode(node, 'bystander'), { status: 'restarting', restarts: 0 });
  t.throws(() => root.spawn(counterSpec('late')), /supervisor root is halted: cannot spawn late/);
});

t.test('the budget is a sliding window: old restarts stop counting', async (t) => {
  let clock = 0;
  const { root, escalations } = tree(t, { maxRestarts: 1, withinMs: 1000, now: () => clock });
  const counter = root.spawn(counterSpec('counter'));
  for (const at of [0, 1000, 2000]) {
    clock = at;
    const back = restarted(root, 'counter');
    counter.send({ type: 'boom' });
    await back;
  }
  t.equal(actorNode(root.inspect(), 'counter').restarts, 3);
  t.same(root.inspect().restartBudget, { maxRestarts: 1, withinMs: 1000, recent: 1 }, 'only the last restart is inside the window');
  clock = 3000;
  t.equal(root.inspect().restartBudget.recent, 0, 'and it leaves the window in turn');
  t.same(escalations, []);
});

t.test('a child supervisor escalates to its parent, which restarts the whole subtree', async (t) => {
  const { root, escalations } = tree(t);
  const uploads = root.supervise({ id: 'uploads', restartBudget: { maxRestarts: 0, withinMs: 1000 } });
  const failing = uploads.spawn(counterSpec('failing', 1));
  const sibling = uploads.spawn(counterSpec('sibling', 7));
  sibling.send({ type: 'inc' });
  const subtreeBack = nextTransition(root, (tr) => tr.id === 'uploads' && tr.event === 'supervisor.restarted');
  const siblingBack = restarted(root, 'sibling');
  const feed: string[] = [];
  root.onTransition((tr) => feed.push(`${tr.id}:${tr.event}:${tr.status}`));
  failing.send({ type: 'boom' });
  t.match(root.inspect().children[0], { id: 'uploads', status: 'halted' });
  await subtreeBack;
  await siblingBack;
  t.same(escalations, []);
  t.equal(sibling.getSnapshot().context.count, 7, 'the sibling started fresh');
  t.match(root.inspect(), {
    status: 'running',
    children: [{ id: 'uploads', status: 'running', restarts: 1, children: [{ id: 'failing', restarts: 0 }, { id: 'sibling', restarts: 0 }] }],
  });
  t.same(feed.slice(0, 4), [
    'failing:xstate.error:restarting',
    'sibling:xstate.stop:restarting',
    'uploads:supervisor.escalated:halted',
    'uploads:supervisor.restarted:running',
  ]);
});

t.test('escalations climb until a budget absorbs them; the root calls onEscalate', async (t) => {
  const { root, escalated } = tree(t, { maxRestarts: 0 });
  const uploads = root.supervise({ id: 'uploads', restartBudget: { maxRestarts: 0, withinMs: 1000 } });
  const escalation = escalated();
  uploads.spawn(counterSpec('failing')).send({ type: 'boom' });
  const error = await escalation;
  t.match(error, { supervisor: 'root', child: 'uploads' });
  t.type(error.cause, EscalationError);
  t.match(error.cause, { supervisor: 'root/uploads', child: 'failing' });
});

t.test('an actor that fails at start restarts until the budget is spent', async (t) => {
  const { root, escalated } = tree(t, { maxRestarts: 3 });
  const escalation = escalated();
  root.spawn(counterSpec('bad-input', -1));
  const error = await escalation;
  t.match(error.message, /child bad-input .*counter start must be >= 0, got -1/);
  t.match(actorNode(root.inspect(), 'bad-input'), { restarts: 3, error: 'counter start must be >= 0, got -1' });
});

t.test('stop() stops children in reverse start order, deepest first, and frees their ids', async (t) => {
  const { root } = tree(t);
  root.spawn(counterSpec('a'));
  const group = root.supervise({ id: 'group' });
  group.spawn(counterSpec('b'));
  group.spawn(counterSpec('c'));
  const d = root.spawn(counterSpec('d'));
  const stopped: string[] = [];
  root.onTransition((tr) => tr.event === 'xstate.stop' && stopped.push(tr.id));
  root.stop();
  t.same(stopped, ['d', 'c', 'b', 'a']);
  t.same(root.inspect(), { id: 'root', kind: 'supervisor', status: 'stopped', restarts: 0, restartBudget: { maxRestarts: 5, withinMs: 10_000, recent: 0 }, children: [] });
  t.equal(root.lookup('a', counterMachine), undefined);
  d.send({ type: 'inc' }); // dropped
  t.throws(() => group.spawn(counterSpec('e')), /supervisor root\/group is stopped/);
});

t.test('stopChild() stops one child for good', async (t) => {
  const { root } = tree(t);
  const group = root.supervise({ id: 'group' });
  group.spawn(counterSpec('b'));
  root.spawn(counterSpec('a'));
  t.equal(root.stopChild('group'), true);
  t.equal(root.stopChild('group'), false);
  t.same(root.inspect().children.map((c) => c.id), ['a']);
  t.equal(root.lookup('b', counterMachine), undefined);
  root.supervise({ id: 'group' }); // the id is free again
});

t.test('ids are unique in the whole tree and usable as path segments', async (t) => {
  const { root } = tree(t);
  const group = root.supervise({ id: 'group' });
  root.spawn(counterSpec('x'));
  t.throws(() => group.spawn(counterSpec('x')), { message: 'actor id "x" is already in use at root' });
  t.throws(() => root.spawn(counterSpec('a/b')), /actor \(kind "counter"\) id: expected a non-empty string without "\/", got "a\/b"/);
  t.throws(() => root.supervise({ id: 'bad', restartBudget: { maxRestarts: -1, withinMs: 10 } }), /root\/bad restartBudget.maxRestarts/);
  t.equal(root.lookup('x', setup({}).createMachine({})), undefined, 'lookup checks the logic');
});

t.test('a listener that throws does not break the actor', async (t) => {
  const { root } = tree(t);
  const warned = new Promise<Error>((resolve) => process.once('warning', resolve));
  const off = root.onTransition(() => {
    off();
    throw new Error('socket closed');
  });
  const counter = root.spawn(counterSpec('counter'));
  counter.send({ type: 'inc' });
  t.equal(counter.getSnapshot().context.count, 1);
  t.match(await warned, { name: 'SupervisionListenerWarning', message: 'a supervision listener threw: socket closed' });
});
