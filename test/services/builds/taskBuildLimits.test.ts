// Per-task build time limits (issue 23 item 7; docs/builds.md, "Time limits"): PATCH
// /tasks/{project}/{task} sets build_timeout_secs / build_max_silent_secs (kiln extension), and a
// worker's buildJob carries the derivation's own limits, else its tasks' (the most generous when
// several tasks want the build; 0 is none), else build.defaultTimeoutSecs / defaultMaxSilentSecs.
// A real server and database with protocol-level workers (test/support/clusterFarm.ts).
import t from 'tap';
import { derivationNode } from '../../support/derivationNodes.js';
import { clusterFarm as farm } from '../../support/clusterFarm.js';
import { signUp } from '../../support/accounts.js';

type TaskView = { name: string; build_timeout_secs: number | null; build_max_silent_secs: number | null; description: string };

t.test('task limits reach the buildJob between the derivation\'s own and the server\'s defaults', async (t) => {
  const f = await farm(t, [{ zone: null, slots: 8 }]);
  const [builder] = f.members;
  const patch = (task: string, body: unknown, token = f.token) => f.kiln.api<TaskView>('PATCH', `/tasks/${f.projectId}/${task}`, { token, body });
  const next = async () => builder!.client.next('buildJob');

  await t.test('the server\'s defaults while the task sets none', async (t) => {
    const node = derivationNode('plain');
    await f.evaluate([node]);
    t.match(await next(), { drvPath: node.drvPath, timeoutSecs: 14_400, maxSilentSecs: 3600 });
  });

  await t.test('PATCH sets the task\'s limits, shown on the task, and its builds get them', async (t) => {
    const changed = await patch('default', { build_timeout_secs: 36_000, build_max_silent_secs: 600 });
    t.equal(changed.status, 200, JSON.stringify(changed.message));
    t.match(changed.message, { name: 'default', build_timeout_secs: 36_000, build_max_silent_secs: 600 });
    t.match((await f.kiln.api<TaskView>('GET', `/tasks/${f.projectId}/default`, { token: f.token })).message, { build_timeout_secs: 36_000 });
    const node = derivationNode('task-limited');
    await f.evaluate([node]);
    t.match(await next(), { drvPath: node.drvPath, timeoutSecs: 36_000, maxSilentSecs: 600 });
  });

  await t.test('the derivation\'s own limits win over the task\'s', async (t) => {
    const node = derivationNode('own-limits');
    node.derivation.timeoutSecs = 120 as never;
    node.derivation.maxSilentSecs = 60 as never;
    await f.evaluate([node]);
    t.match(await next(), { drvPath: node.drvPath, timeoutSecs: 120, maxSilentSecs: 60 });
  });

  await t.test('a build two tasks want gets the more generous limit; 0 (none) is the most generous', async (t) => {
    t.equal((await f.kiln.api('PUT', `/tasks/${f.projectId}`, { token: f.token, body: { name: 'nightly', build_timeout_secs: 0, build_max_silent_secs: 300 } })).status, 200);
    const shared = derivationNode('shared');
    const both = derivationNode('both-tasks', [shared.drvPath]);
    await f.evaluate([shared, both]);
    const first = await next();
    t.match(first, { drvPath: shared.drvPath, timeoutSecs: 36_000, maxSilentSecs: 600 }, 'wanted by default alone when dispatched');
    // while its input builds, the second task's evaluation reaches the dependent too
    await f.evaluate([shared, both], 'nightly');
    f.succeed(builder!.client, first.jobId, shared);
    t.match(await next(), { drvPath: both.drvPath, timeoutSecs: 0, maxSilentSecs: 600 }, 'default wants 36000 s / 600 s, nightly none / 300 s');
  });

  await t.test('null gives a limit back to the server\'s default', async (t) => {
    t.equal((await patch('default', { build_timeout_secs: null, build_max_silent_secs: null })).status, 200);
    t.equal((await patch('nightly', { build_timeout_secs: null, build_max_silent_secs: null })).status, 200);
    const node = derivationNode('back-to-defaults');
    await f.evaluate([node]);
    t.match(await next(), { drvPath: node.drvPath, timeoutSecs: 14_400, maxSilentSecs: 3600 });
  });

  await t.test('malformed changes are refused naming the problem; the task is unchanged', async (t) => {
    for (const [body, field] of [
      [{ build_timeout_secs: -1 }, 'build_timeout_secs'],
      [{ build_timeout_secs: 2_592_001 }, 'build_timeout_secs'],
      [{ build_max_silent_secs: 1.5 }, 'build_max_silent_secs'],
      [{ build_max_silent_secs: '60' }, 'build_max_silent_secs'],
      [{ name: 'renamed' }, 'name'],
      [{}, 'at least one field'],
    ] as const) {
      const refused = await patch('default', body);
      t.equal(refused.status, 400, JSON.stringify(body));
      t.match(JSON.stringify(refused.message), field, `the answer names ${field}`);
    }
    t.match((await f.kiln.api<TaskView>('GET', `/tasks/${f.projectId}/default`, { token: f.token })).message, { build_timeout_secs: null, build_max_silent_secs: null });
    t.equal((await patch('missing', { description: 'x' })).status, 404);
  });

  await t.test('only a member who manages tasks changes them', async (t) => {
    const eve = await signUp(f.kiln, 'eve');
    const refused = await patch('default', { build_timeout_secs: 1 }, eve.token);
    t.ok(refused.status === 403 || refused.status === 404, `refused (${refused.status})`);
    t.match((await f.kiln.api<TaskView>('GET', `/tasks/${f.projectId}/default`, { token: f.token })).message, { build_timeout_secs: null });
  });
});
