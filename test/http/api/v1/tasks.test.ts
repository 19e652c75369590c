import t from 'tap';
import { startTestKiln } from '../../../support/kiln.js';
import { signUp } from '../../../support/accounts.js';

t.test('tasks: create, list, get, star, unstar, delete', async (t) => {
  const kiln = await startTestKiln(t);
  await signUp(kiln, 'root');
  const ada = await signUp(kiln, 'ada');
  const bob = await signUp(kiln, 'bob');
  const eve = await signUp(kiln, 'eve');
  await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } });
  await kiln.api('POST', '/orgs/acme/users', { token: ada.token, body: { user: 'bob', role: 'View' } });
  await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'web', repository: 'file:///x' } });

  const created = await kiln.api<{ name: string; branch: string; keep_evaluations: number; stars: number }>('PUT', '/tasks/web', {
    token: ada.token, body: { name: 'nightly', branch: 'main', keep_evaluations: 5 },
  });
  t.equal(created.status, 200, JSON.stringify(created.message));
  t.match(created.message, { name: 'nightly', branch: 'main', keep_evaluations: 5, stars: 0 });
  t.equal((await kiln.api('PUT', '/tasks/web', { token: ada.token, body: { name: 'nightly' } })).code, 'task_exists');
  t.equal((await kiln.api('PUT', '/tasks/web', { token: bob.token, body: { name: 'other' } })).status, 403, 'View lacks manageTasks');
  t.equal((await kiln.api('PUT', '/tasks/web', { token: eve.token, body: { name: 'other' } })).status, 404);
  t.same((await kiln.api<{ name: string }[]>('GET', '/tasks/web', { token: bob.token })).message.map((x) => x.name), ['default', 'nightly']);
  t.equal((await kiln.api('GET', '/tasks/web/nightly', { token: eve.token })).status, 404);
  t.equal((await kiln.api('GET', '/tasks/web/nope', { token: bob.token })).status, 404);

  const starred = await kiln.api<{ stars: number; starred: boolean }>('POST', '/tasks/web/nightly/star', { token: bob.token });
  t.match(starred.message, { stars: 1, starred: true }, 'View may star');
  await kiln.api('POST', '/tasks/web/nightly/star', { token: bob.token });
  t.match((await kiln.api('POST', '/tasks/web/nightly/star', { token: ada.token })).message, { stars: 2, starred: true }, 'starring twice counts once');
  t.match((await kiln.api('GET', '/tasks/web/nightly', { token: bob.token })).message, { stars: 2, starred: true });
  t.match((await kiln.api('DELETE', '/tasks/web/nightly/star', { token: bob.token })).message, { stars: 1, starred: false });

  t.equal((await kiln.api('DELETE', '/tasks/web/default', { token: ada.token })).code, 'default_task');
  t.equal((await kiln.api('DELETE', '/tasks/web/nightly', { token: bob.token })).status, 403);
  t.equal((await kiln.api('DELETE', '/tasks/web/nightly', { token: ada.token })).status, 200);

  for (const [body, field] of [
    [{}, 'name'], [{ name: 'a b' }, 'name'], [{ name: 'x', keep_evaluations: -1 }, 'keep_evaluations'],
    [{ name: 'x', requires_approval: 'yes' }, 'requires_approval'], [{ name: 'x', wildcard: '' }, 'wildcard'],
  ] as const) {
    const res = await kiln.api('PUT', '/tasks/web', { token: ada.token, body });
    t.equal(res.status, 400);
    t.match(res.message, new RegExp(`^${field}: `));
  }
  t.equal((await kiln.sql`select 1 from tasks`).length, 1, 'only default is left');
});
