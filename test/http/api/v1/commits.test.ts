// GET /commits/{id}: the evaluations made at a commit that the caller may see, grouped with the
// repositories they fetched; strangers and unknown commits get 404, malformed ids 400.
import t from 'tap';
import { signUp } from '../../../support/accounts.js';
import { startTestKiln } from '../../../support/kiln.js';

interface Commit { hash: string; message: string | null; author: string | null; repositories: string[]; evaluations: { id: string; project: string; task: string; phase: string }[] }

t.test('commits', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  const bob = await signUp(kiln, 'bob');
  for (const [who, org, project] of [[ada, 'acme', 'app'], [ada, 'acme', 'lib'], [bob, 'bobco', 'tool']] as const) {
    if ((await kiln.api('GET', `/orgs/${org}`, { token: who.token })).status !== 200) await kiln.api('PUT', '/orgs', { token: who.token, body: { name: org } });
    t.equal((await kiln.api('PUT', `/projects/${org}`, { token: who.token, body: { name: project, repository: `file:///repos/${project}` } })).status, 200);
  }
  const commit = 'a'.repeat(40);
  const evaluate = async (token: string, project: string) => {
    const [row] = await kiln.sql<{ id: string }[]>`select id from projects where name = ${project}`;
    const res = await kiln.api<string>('POST', `/tasks/${row!.id}/default/evaluate`, { token, body: { commit } });
    if (res.status !== 200 && res.status !== 404) throw new Error(String(res.message));
    return res.message;
  };
  // The task default exists once the project was evaluated through its org path.
  for (const [token, org, project] of [[ada.token, 'acme', 'app'], [ada.token, 'acme', 'lib'], [bob.token, 'bobco', 'tool']] as const) {
    await kiln.sql`insert into tasks (project_id, name) select id, 'default' from projects where name = ${project} on conflict do nothing`;
    void org;
    await evaluate(token, project);
  }
  const second = await evaluate(ada.token, 'app');

  const got = await kiln.api<Commit>('GET', `/commits/${commit}`, { token: ada.token });
  t.equal(got.status, 200, JSON.stringify(got.message));
  t.match(got.message, { hash: commit, message: null, author: null, repositories: ['file:///repos/app', 'file:///repos/lib'] });
  t.equal(got.message.evaluations.length, 3, 'bob\'s project stays hidden');
  t.equal(got.message.evaluations[0]!.id, second, 'newest first');
  // Queued, or already waiting: the scheduler's pass finds no writable cache for the project and may run first.
  t.match(got.message.evaluations[0], { project: 'acme/app', task: 'default', phase: /^(queued|waiting)$/ });

  const bobs = await kiln.api<Commit>('GET', `/commits/${commit}`, { token: bob.token });
  t.same(bobs.message.evaluations.map((e) => e.project), ['bobco/tool']);

  const carol = await signUp(kiln, 'carol');
  t.equal((await kiln.api('GET', `/commits/${commit}`, { token: carol.token })).status, 404, 'nothing visible');
  t.equal((await kiln.api('GET', `/commits/${'b'.repeat(64)}`, { token: ada.token })).status, 404, 'an unknown commit');
  for (const bad of ['abc', 'A'.repeat(40), 'g'.repeat(40), `${'a'.repeat(40)}0`]) {
    const res = await kiln.api('GET', `/commits/${bad}`, { token: ada.token });
    t.equal(res.status, 400, bad);
    t.match(String(res.message), /40 or 64/);
  }
  t.equal((await kiln.api('GET', `/commits/${commit}`)).status, 401);
});
