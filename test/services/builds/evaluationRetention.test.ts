// eval.maxKeep on a real server: creating an evaluation prunes the task's final evaluations
// beyond min(keep_evaluations, eval.maxKeep); running ones stay, their builds rows go with them,
// the shared derivation_builds stay. Plus the limit rule itself.
import t from 'tap';
import { effectiveKeep, pruneTaskEvaluations } from '../../../services/index.js';
import { signUp } from '../../support/accounts.js';
import { startTestKiln } from '../../support/kiln.js';

t.test('the effective limit', async (t) => {
  t.equal(effectiveKeep(30, 30), 30);
  t.equal(effectiveKeep(30, 5), 5, 'eval.maxKeep caps the task');
  t.equal(effectiveKeep(3, 30), 3, 'a task may keep fewer');
  t.equal(effectiveKeep(0, 10), 10, 'a task without a limit still has the cap');
  t.equal(effectiveKeep(7, 0), 7, 'eval.maxKeep 0 lifts only the cap');
  t.equal(effectiveKeep(0, 0), null, 'both 0: keep everything');
});

t.test('evaluations beyond eval.maxKeep are pruned when a new one is created', async (t) => {
  const kiln = await startTestKiln(t, { 'eval.maxKeep': 2 });
  const ada = await signUp(kiln, 'ada');
  await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } });
  await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'app', repository: 'file:///nonexistent' } });
  const [project] = await kiln.sql<{ id: string }[]>`select id from projects where name = 'app'`;
  await kiln.sql`insert into tasks (project_id, name) values (${project!.id}, 'default') on conflict do nothing`;
  const [task] = await kiln.sql<{ id: string }[]>`select id from tasks where project_id = ${project!.id} and name = 'default'`;
  // A shared derivation build the old evaluations use.
  const [drv] = await kiln.sql<{ id: string }[]>`
    insert into derivations (drv_path, name, system, outputs) values ('/nix/store/00000000000000000000000000000000-x.drv', 'x', 'x86_64-linux', '{}') returning id`;
  const [shared] = await kiln.sql<{ id: string }[]>`insert into derivation_builds (derivation_id, status) values (${drv!.id}, 'completed') returning id`;

  const evaluate = async (n: number) => {
    const res = await kiln.api<string>('POST', `/tasks/${project!.id}/default/evaluate`, { token: ada.token, body: { commit: String(n).repeat(40) } });
    if (res.status !== 200) throw new Error(String(res.message));
    await kiln.sql`insert into builds (evaluation_id, derivation_build_id) values (${res.message}, ${shared!.id})`;
    return res.message;
  };
  const ids: string[] = [];
  for (const n of [1, 2, 3]) ids.push(await evaluate(n));
  // The first is still queued (running): it stays although it is beyond the limit.
  t.equal((await kiln.sql`select 1 from evaluations where task_id = ${task!.id}`).length, 3);
  await kiln.sql`update evaluations set phase = 'completed', finished_at = now() where id = any(${ids.slice(0, 2)})`;
  ids.push(await evaluate(4));
  const left = await kiln.sql<{ id: string }[]>`select id from evaluations where task_id = ${task!.id} order by created_at`;
  t.same(left.map((r) => r.id), [ids[2], ids[3]], 'the two newest stay');
  t.same(await kiln.sql`select 1 from builds where evaluation_id = any(${ids.slice(0, 2)})`, [], 'their builds rows went with them');
  t.equal((await kiln.sql`select 1 from derivation_builds where id = ${shared!.id}`).length, 1, 'the shared build stays');
  t.equal((await kiln.api('GET', `/evals/${ids[0]}`, { token: ada.token })).status, 404);

  // The task's own setting is lower than the cap: it wins.
  await kiln.sql`update tasks set keep_evaluations = 1 where id = ${task!.id}`;
  await kiln.sql`update evaluations set phase = 'failed', finished_at = now() where task_id = ${task!.id}`;
  t.same(await pruneTaskEvaluations(kiln.sql, task!.id, 2), [ids[2]]);
  t.same(await pruneTaskEvaluations(kiln.sql, task!.id, 0), [], 'nothing more to prune');
});
