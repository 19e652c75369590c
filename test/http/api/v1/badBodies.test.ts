import t from 'tap';
import { startTestKiln } from '../../../support/kiln.js';
import { signUp } from '../../../support/accounts.js';
import { insertCache } from '../../../support/modelRows.js';

// Every body of the access endpoints, broken in the ways clients break them: missing fields,
// wrong types, overlong strings, unknown fields. Each is a 400 naming the field, and no row of
// the model changes.
const TABLES = ['organizations', 'organization_members', 'projects', 'tasks', 'servers', 'project_members', 'cache_members',
  'invitations', 'subscriptions', 'subscription_requests', 'worker_registrations'];

t.test('bad bodies write nothing', async (t) => {
  const kiln = await startTestKiln(t);
  const admin = await signUp(kiln, 'admin');
  await signUp(kiln, 'bob');
  await kiln.api('PUT', '/orgs', { token: admin.token, body: { name: 'acme' } });
  await kiln.api('PUT', '/projects/acme', { token: admin.token, body: { name: 'web', repository: 'file:///x' } });
  await kiln.api('PUT', '/servers/acme', { token: admin.token, body: { name: 'box', host: 'h' } });
  const cacheId = await insertCache(kiln.sql, 'main');
  await kiln.sql`update caches set owner_id = ${admin.id} where id = ${cacheId}`;

  const long = 'x'.repeat(5000);
  const cases: [string, string, unknown, string][] = [
    ['PUT', '/orgs', { display_name: 'A' }, 'name'],
    ['PATCH', '/orgs/acme', { display_name: long }, 'display_name'],
    ['PATCH', '/orgs/acme', { description: 7 }, 'description'],
    ['PATCH', '/orgs/acme', { name: 'renamed' }, 'name'],
    ['POST', '/orgs/acme/users', { user: 'bob', role: 'admin' }, 'role'],
    ['PATCH', '/orgs/acme/users', { user: ['bob'], role: 'View' }, 'user'],
    ['DELETE', '/orgs/acme/users', { name: 'bob' }, 'user'],
    ['POST', '/orgs/acme/subscribe/main', { mode: 9 }, 'mode'],
    ['PUT', '/projects/acme', { name: 'p', repository: 7 }, 'repository'],
    ['PATCH', '/projects/acme/web', { wildcard: long }, 'wildcard'],
    ['PATCH', '/projects/acme/web', { repository: '' }, 'repository'],
    ['PUT', '/tasks/web', { name: 'x'.repeat(64) }, 'name'],
    ['PUT', '/tasks/web', { name: 't', description: long }, 'description'],
    ['PUT', '/servers/acme', { name: 's', host: long }, 'host'],
    ['PATCH', '/servers/acme/box', { port: '22' }, 'port'],
    ['PATCH', '/servers/acme/box', { features: 'kvm' }, 'features'],
    ['POST', '/projects/web/users', { user: 'bob', role: null }, 'role'],
    ['PATCH', '/projects/web/users', { user: 'bob' }, 'role'],
    ['DELETE', '/projects/web/users', {}, 'user'],
    ['POST', '/caches/main/users', { user: 'b o b', role: 'View' }, 'user'],
    ['PATCH', '/caches/main/users', { role: 'View' }, 'user'],
    ['DELETE', '/caches/main/users', { user: 5 }, 'user'],
    ['POST', '/projects/web/subscribe/main', { mode: -1 }, 'mode'],
    ['POST', '/projects/web/workers', { worker_id: 42 }, 'worker_id'],
    ['POST', '/projects/web/workers', { name: long }, 'name'],
  ];
  const counts = async () => Object.fromEntries(await Promise.all(TABLES.map(async (table) =>
    [table, (await kiln.sql.unsafe<{ n: number }[]>(`select count(*)::int as n from ${table}`))[0]!.n] as const)));
  const before = await counts();
  for (const [method, path, body, field] of cases) {
    const res = await kiln.api<string>(method, path, { token: admin.token, body });
    t.equal(res.status, 400, `${method} ${path} ${JSON.stringify(body).slice(0, 60)}`);
    t.equal(res.code, 'invalid_body');
    t.ok(res.message.startsWith(`${field}: `) || res.message.includes(`"${field}"`), `names ${field}: ${res.message}`);
  }
  const notJson = await kiln.api('PUT', '/orgs', { token: admin.token, body: '{"name": ' });
  t.equal(notJson.code, 'invalid_json');
  t.same(await counts(), before, 'nothing was written');
});
