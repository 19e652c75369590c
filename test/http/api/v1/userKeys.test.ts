import t from 'tap';
import { startTestKiln } from '../../../support/kiln.js';
import { signUp } from '../../../support/accounts.js';
import { insertCache, insertProject } from '../../../support/modelRows.js';

interface Key {
  name: string;
  secret?: string;
  prefix: string;
  permissions: string[];
  project: string | null;
  cache: string | null;
  allowed_ips: string[];
  expires_at: string | null;
  last_used_at: string | null;
}

t.test('create, list, use and delete a key', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  const projectId = await insertProject(kiln.sql, 'acme', 'web');
  await insertCache(kiln.sql, 'main');

  const created = await kiln.api<Key>('POST', '/user/keys', {
    token: ada.token,
    body: { name: 'ci', permissions: ['viewProject', 'writeStore', 'viewProject'], project: 'acme/web', cache: 'main', expires_in_days: 30, allowed_ips: ['10.1.2.3/8', '2001:db8::1/32', '192.0.2.7'] },
  });
  t.equal(created.status, 200);
  const key = created.message;
  t.match(key.secret, /^SVC[0-9A-Za-z]{43}$/);
  t.match(key, { name: 'ci', permissions: ['viewProject', 'writeStore'], project: 'acme/web', cache: 'main', allowed_ips: ['10.0.0.0/8', '2001:db8::/32', '192.0.2.7/32'] });
  t.equal(key.prefix, key.secret!.slice(0, 8));
  const days = (Date.parse(key.expires_at!) - Date.now()) / 86_400_000;
  t.ok(days > 29.9 && days <= 30, 'expires in 30 days');
  const [row] = await kiln.sql<{ secret_hash: string; project_id: string }[]>`select secret_hash, project_id from api_keys`;
  t.match(row!.secret_hash, /^[0-9a-f]{64}$/);
  t.notOk(row!.secret_hash.includes(key.secret!), 'the secret is not stored');
  t.equal(row!.project_id, projectId);

  const byUuid = await kiln.api<Key>('POST', '/user/keys', { token: ada.token, body: { name: 'by-uuid', permissions: ['viewProject'], project: projectId } });
  t.equal(byUuid.message.project, 'acme/web', 'a UUID resolves too');
  const byName = await kiln.api<Key>('POST', '/user/keys', { token: ada.token, body: { name: 'by-name', permissions: ['viewProject'], project: 'web' } });
  t.equal(byName.message.project, 'acme/web', 'a project name only one organization uses resolves');

  const list = await kiln.api<Key[]>('GET', '/user/keys', { token: ada.token });
  t.same(list.message.map((k) => k.name), ['ci', 'by-uuid', 'by-name']);
  t.notOk(list.message.some((k) => 'secret' in k), 'the secret is shown once');

  const open = await kiln.api<Key>('POST', '/user/keys', { token: ada.token, body: { name: 'open', permissions: ['viewCache'] } });
  const me = await kiln.api<{ username: string }>('GET', '/user', { token: open.message.secret! });
  t.same([me.status, me.message.username], [200, 'ada'], 'a key authenticates as its owner');

  const dup = await kiln.api('POST', '/user/keys', { token: ada.token, body: { name: 'ci', permissions: ['viewProject'] } });
  t.same([dup.status, dup.code], [409, 'key_exists']);
  const bob = await signUp(kiln, 'bob');
  t.equal((await kiln.api('POST', '/user/keys', { token: bob.token, body: { name: 'ci', permissions: ['viewProject'] } })).status, 200, 'names are unique per user');

  t.same((await kiln.api('DELETE', '/user/keys?name=open', { token: ada.token })).status, 200, 'delete with ?name=');
  const gone = await kiln.api('GET', '/user', { token: open.message.secret! });
  t.same([gone.status, gone.code], [401, 'invalid_token'], 'a deleted key is refused');
  t.equal((await kiln.api('DELETE', '/user/keys', { token: ada.token, body: { name: 'by-uuid' } })).status, 200, 'delete with a body');
  const missing = await kiln.api('DELETE', '/user/keys', { token: ada.token, body: { name: 'by-uuid' } });
  t.same([missing.status, missing.code], [404, 'key_not_found']);
  t.equal((await kiln.api('DELETE', '/user/keys', { token: ada.token, body: {} })).code, 'invalid_body');
  t.equal((await kiln.api('DELETE', `/user/keys?name=${'x'.repeat(101)}`, { token: ada.token })).code, 'invalid_query');
  t.equal((await kiln.api('DELETE', '/user/keys?name=ci', { token: bob.token })).status, 200, "bob's key, not ada's");
  t.equal((await kiln.sql`select 1 from api_keys where name = 'ci'`).length, 1);
});

t.test('a key cannot manage keys or the account: session only', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  const key = (await kiln.api<Key>('POST', '/user/keys', { token: ada.token, body: { name: 'k', permissions: ['manageProject'] } })).message.secret!;
  for (const [method, path, body] of [
    ['POST', '/user/keys', { name: 'k2', permissions: ['viewProject'] }],
    ['DELETE', '/user/keys', { name: 'k' }],
    ['DELETE', '/user', undefined],
    ['PATCH', '/user/settings', { name: 'Eve' }],
    ['POST', '/auth/logout', undefined],
  ] as const) {
    const res = await kiln.api(method, path, { token: key, body });
    t.same([res.status, res.code], [403, 'session_required'], `${method} ${path}`);
  }
  t.equal((await kiln.api('GET', '/user/keys', { token: key })).status, 200, 'listing is allowed');
  t.equal((await kiln.sql`select 1 from api_keys`).length, 1);
  t.equal((await kiln.sql`select 1 from users`).length, 1);
});

t.test('bad key bodies: 400 naming the field, nothing written', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  const ok = { name: 'ci', permissions: ['viewProject'] };
  const cases: [string, unknown, RegExp][] = [
    ['missing name', { permissions: ['viewProject'] }, /^name: /],
    ['name of wrong type', { ...ok, name: 7 }, /^name: .*expected string/],
    ['empty name', { ...ok, name: '' }, /^name: /],
    ['overlong name', { ...ok, name: 'n'.repeat(101) }, /^name: /],
    ['missing permissions', { name: 'ci' }, /^permissions: /],
    ['permissions not a list', { ...ok, permissions: 'viewProject' }, /^permissions: /],
    ['no permissions', { ...ok, permissions: [] }, /^permissions: must name at least one permission/],
    ['unknown permission', { ...ok, permissions: ['viewProject', 'fly'] }, /^permissions\.1: unknown permission "fly"/],
    ['invalid CIDR', { ...ok, allowed_ips: ['10.0.0.0/33'] }, /^allowed_ips\.0: "10\.0\.0\.0\/33" is not a CIDR block/],
    ['not an address', { ...ok, allowed_ips: ['192.0.2.0/24', 'localhost'] }, /^allowed_ips\.1: "localhost" is not a CIDR block/],
    ['allowed_ips not a list', { ...ok, allowed_ips: '10.0.0.0/8' }, /^allowed_ips: /],
    ['zero days', { ...ok, expires_in_days: 0 }, /^expires_in_days: /],
    ['fractional days', { ...ok, expires_in_days: 1.5 }, /^expires_in_days: /],
    ['days as text', { ...ok, expires_in_days: '7' }, /^expires_in_days: /],
    ['unknown project', { ...ok, project: 'acme/nothing' }, /^project: no project "acme\/nothing"/],
    ['overlong project', { ...ok, project: 'p'.repeat(200) }, /^project: /],
    ['unknown cache', { ...ok, cache: 'nothing' }, /^cache: no cache "nothing"/],
    ['unknown field', { ...ok, scope: 'all' }, /Unrecognized key: "scope"/],
  ];
  for (const [what, body, message] of cases) {
    const res = await kiln.api('POST', '/user/keys', { token: ada.token, body });
    t.same([res.status, res.code], [400, 'invalid_body'], what);
    t.match(res.message, message, what);
  }
  t.equal((await kiln.sql`select 1 from api_keys`).length, 0, 'nothing written');
});

t.test('expired keys are refused; last_used_at is written at most once a minute', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  const key = (await kiln.api<Key>('POST', '/user/keys', { token: ada.token, body: { name: 'k', permissions: ['viewProject'], expires_in_days: 1 } })).message.secret!;
  t.equal((await kiln.api('GET', '/user', { token: key })).status, 200);
  const [first] = await kiln.sql<{ last_used_at: Date }[]>`select last_used_at from api_keys`;
  t.ok(first!.last_used_at, 'set on first use');
  await kiln.api('GET', '/user', { token: key });
  const [second] = await kiln.sql<{ last_used_at: Date }[]>`select last_used_at from api_keys`;
  t.same(second!.last_used_at, first!.last_used_at, 'not rewritten within the minute');
  await kiln.sql`update api_keys set last_used_at = last_used_at - interval '2 minutes'`;
  await kiln.api('GET', '/user', { token: key });
  const [third] = await kiln.sql<{ last_used_at: Date }[]>`select last_used_at from api_keys`;
  t.ok(third!.last_used_at > second!.last_used_at, 'rewritten after a minute');

  await kiln.sql`update api_keys set expires_at = now() - interval '1 second'`;
  const expired = await kiln.api('GET', '/user', { token: key });
  t.same([expired.status, expired.code], [401, 'token_expired']);
  await kiln.sql`update api_keys set expires_at = null`;
  await kiln.sql`update users set disabled = true`;
  t.same((await kiln.api('GET', '/user', { token: key })).code, 'account_disabled', "a disabled owner's keys are refused");
});

t.test('allowed_ips with X-Forwarded-For from a trusted proxy', async (t) => {
  const kiln = await startTestKiln(t); // http.trustedProxies defaults to loopback
  const ada = await signUp(kiln, 'ada');
  const key = (await kiln.api<Key>('POST', '/user/keys', { token: ada.token, body: { name: 'k', permissions: ['viewProject'], allowed_ips: ['203.0.113.0/24', '2001:db8::/32'] } })).message.secret!;
  const from = (xff?: string) => kiln.api('GET', '/user', { token: key, headers: xff ? { 'x-forwarded-for': xff } : {} });
  t.equal((await from('203.0.113.9')).status, 200);
  t.equal((await from('2001:db8::5')).status, 200);
  t.equal((await from('192.0.2.1, 203.0.113.9')).status, 200, 'the right-most untrusted hop counts');
  const outside = await from('198.51.100.1');
  t.same([outside.status, outside.code], [403, 'forbidden_source_ip']);
  t.same((await from()).code, 'forbidden_source_ip', 'the proxy itself is not inside allowed_ips');
  t.same((await from('203.0.113.9, 198.51.100.1')).code, 'forbidden_source_ip', 'a spoofed left-most hop does not help');
  t.same((await from('203.0.113.9, garbage')).code, 'forbidden_source_ip', 'nor does one behind a hop that is no address (the proxy counts)');
  t.equal((await kiln.api('GET', '/user', { token: ada.token, headers: { 'x-forwarded-for': '198.51.100.1' } })).status, 200, 'sessions have no address limit');
});

t.test('allowed_ips when the peer is not a trusted proxy', async (t) => {
  const kiln = await startTestKiln(t, { 'http.trustedProxies': ['10.0.0.0/8'] });
  const ada = await signUp(kiln, 'ada');
  const create = async (name: string, allowed: string[]) =>
    (await kiln.api<Key>('POST', '/user/keys', { token: ada.token, body: { name, permissions: ['viewProject'], allowed_ips: allowed } })).message.secret!;
  const remote = await create('remote', ['203.0.113.0/24']);
  const local = await create('local', ['127.0.0.0/8']);
  const spoofed = await kiln.api('GET', '/user', { token: remote, headers: { 'x-forwarded-for': '203.0.113.9' } });
  t.same([spoofed.status, spoofed.code], [403, 'forbidden_source_ip'], 'X-Forwarded-For from an untrusted peer is ignored');
  t.equal((await kiln.api('GET', '/user', { token: local, headers: { 'x-forwarded-for': '198.51.100.1' } })).status, 200, 'the peer address counts');
});
