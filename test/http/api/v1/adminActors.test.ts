import t from 'tap';
import { createMachine } from 'xstate';
import { signUp } from '../../../support/accounts.js';
import { eventually, openLive, type LiveRefusal } from '../../../support/events.js';
import { startTestKiln } from '../../../support/kiln.js';

interface Node { id: string; kind: string; restarts: number; state?: unknown; mailbox?: number; summary?: { passes?: number }; children?: Node[] }
const find = (node: Node, id: string): Node | undefined =>
  node.id === id ? node : (node.children ?? []).map((c) => find(c, id)).find(Boolean);

// A machine whose action throws on `crash`: the supervisor must restart it.
const fragile = createMachine({
  id: 'fragile',
  initial: 'idle',
  states: { idle: { on: { crash: { actions: () => { throw new Error('boom'); } } } } },
});

t.test('GET /admin/actors shows the tree, state values and restarts to a superuser only', async (t) => {
  const kiln = await startTestKiln(t);
  const admin = await signUp(kiln, 'ada'); // the first account is the superuser
  const eve = await signUp(kiln, 'eve');
  const actor = kiln.root.spawn({ id: 'fragile', kind: 'test-fragile', logic: fragile, input: undefined });
  const restarted = new Promise<void>((resolve) => {
    const stop = kiln.root.onTransition((tr) => {
      if (tr.id === 'fragile' && tr.restarts >= 1 && tr.event === 'xstate.init') {
        stop();
        resolve();
      }
    });
  });
  actor.send({ type: 'crash' });
  await restarted;

  const res = await kiln.api<Node>('GET', '/admin/actors', { token: admin.token });
  t.equal(res.status, 200);
  const budget = find(res.message, 'upload-budget');
  t.equal(budget?.kind, 'upload-budget');
  t.equal(budget?.state, 'idle');
  t.equal(budget?.mailbox, 0);
  t.equal(find(res.message, 'fragile')?.restarts, 1, 'the crash shows as one restart');

  const loop = find(res.message, 'scheduler-loop');
  t.equal(loop?.kind, 'scheduler-loop', "the scheduler's loop is listed");
  t.match(loop?.state, /^(idle|running|running-with-another-pass-pending)$/);
  const passesBefore = loop?.summary?.passes ?? -1;
  t.ok(passesBefore >= 0, 'with its pass count');
  await kiln.scheduler.passNow(); // a wake, and the pass it runs
  const after = find((await kiln.api<Node>('GET', '/admin/actors', { token: admin.token })).message, 'scheduler-loop');
  t.ok((after?.summary?.passes ?? -1) > passesBefore, 'the pass count grows after a wake');

  t.equal((await kiln.api('GET', '/admin/actors', { token: eve.token })).status, 403, 'not for other users');
  t.equal((await kiln.api('GET', '/admin/actors')).status, 401);
});

t.test('/admin/actors/live streams the tree\'s transitions to superusers only', async (t) => {
  const kiln = await startTestKiln(t);
  const admin = await signUp(kiln, 'ada');
  const eve = await signUp(kiln, 'eve');
  const refusal = await openLive(kiln, '/admin/actors/live', eve.token, 'query').then(
    (c) => (c.close(), null),
    (e: LiveRefusal) => e,
  );
  t.match(refusal, { status: 403, body: { code: 'forbidden' } }, 'not for other users');

  const feed = await openLive(kiln, '/admin/actors/live', admin.token, 'query');
  t.teardown(() => feed.close());
  const actor = kiln.root.spawn({ id: 'fragile-live', kind: 'test-fragile', logic: fragile, input: undefined });
  actor.send({ type: 'crash' });
  const restart = await eventually('the restart on the feed', async () =>
    feed.frames.find((f) => f.content['id'] === 'fragile-live' && f.content['event'] === 'xstate.init' && f.content['restarts'] === 1));
  t.equal(restart.event, 'actor.transition');
  t.match(restart.content, { supervisor: 'root', kind: 'test-fragile', state: 'idle', status: 'running' });
  t.ok(feed.frames.some((f) => f.content['id'] === 'fragile-live' && f.content['event'] === 'xstate.error'), 'the crash came first');
  const tree = await kiln.api<{ restartBudget: { maxRestarts: number; withinMs: number; recent: number } }>('GET', '/admin/actors', { token: admin.token });
  t.match(tree.message.restartBudget, { maxRestarts: Number, withinMs: Number, recent: 1 }, "the root's budget shows the restart");
});

