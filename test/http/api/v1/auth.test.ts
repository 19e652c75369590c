import t from 'tap';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestKiln } from '../../../support/kiln.js';
import { freshAddress, login, registerUser, signUp } from '../../../support/accounts.js';

t.test('register, log in, use the session, log out', async (t) => {
  const kiln = await startTestKiln(t);
  const reg = await kiln.api<Record<string, unknown>>('POST', '/auth/basic/register', {
    body: { username: 'ada', name: 'Ada Lovelace', email: 'ada@example.test', password: 'correct horse' },
    headers: freshAddress(),
  });
  t.equal(reg.status, 200);
  t.match(reg.message, { username: 'ada', name: 'Ada Lovelace', email: 'ada@example.test', superuser: true, email_verified: false, has_password: true, verification_email: 'skipped' });
  t.notOk('password_hash' in reg.message, 'no hash leaves the server');
  const [row] = await kiln.sql<{ password_hash: string }[]>`select password_hash from users where username = 'ada'`;
  t.match(row!.password_hash, /^\$argon2id\$/);

  const second = await registerUser(kiln, 'bob');
  const [bob] = await kiln.sql<{ superuser: boolean }[]>`select superuser from users where id = ${second.id}`;
  t.equal(bob!.superuser, false, 'only the first account becomes superuser');

  // loginname may be the username or the e-mail address
  const byName = await login(kiln, 'ada', 'correct horse');
  const byEmail = await login(kiln, 'ADA@example.test', 'correct horse');
  t.match(byName, /^[\w-]+\.[\w-]+\.[\w-]+$/, 'a JWT');
  const claims = JSON.parse(Buffer.from(byName.split('.')[1]!, 'base64url').toString()) as Record<string, unknown>;
  t.match(claims, { iss: 'kiln', sub: String, jti: String, exp: Number, iat: Number });
  t.equal((claims['exp'] as number) - (claims['iat'] as number), 30 * 24 * 3600, 'sessions last 30 days');
  const [session] = await kiln.sql<{ user_id: string; address: string }[]>`select user_id, address from sessions where id = ${claims['jti'] as string}`;
  t.equal(session!.user_id, claims['sub']);
  t.match(session!.address, /^198\.51\./, 'the client address behind the trusted proxy');

  const me = await kiln.api<{ username: string }>('GET', '/user', { token: byName });
  t.equal(me.status, 200);
  t.equal(me.message.username, 'ada');

  const out = await kiln.api('POST', '/auth/logout', { token: byName });
  t.equal(out.status, 200);
  const after = await kiln.api('GET', '/user', { token: byName });
  t.equal(after.status, 401);
  t.equal(after.code, 'invalid_token', 'a logged-out token is refused');
  t.equal((await kiln.api('POST', '/auth/logout', { token: byName })).status, 401);
  t.equal((await kiln.api('GET', '/user', { token: byEmail })).status, 200, 'other sessions live on');
});

t.test('refusals of sign-in', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await registerUser(kiln, 'ada');
  const attempt = (loginname: string, password: string) =>
    kiln.api('POST', '/auth/basic/login', { body: { loginname, password }, headers: freshAddress() });
  const wrong = await attempt('ada', 'not the password');
  t.equal(wrong.status, 401);
  t.equal(wrong.code, 'invalid_credentials');
  const nobody = await attempt('nobody', 'whatever1');
  t.same([nobody.status, nobody.code, nobody.message], [401, 'invalid_credentials', wrong.message], 'no such user looks like a wrong password');

  await kiln.sql`update users set disabled = true where id = ${ada.id}`;
  const disabled = await attempt('ada', ada.password);
  t.same([disabled.status, disabled.code], [403, 'account_disabled']);

  t.equal((await kiln.api('GET', '/user')).code, 'unauthorized');
  t.equal((await kiln.api('GET', '/user', { token: 'not-a-jwt' })).code, 'invalid_token');
  t.equal((await kiln.api('GET', '/user', { headers: { authorization: 'Basic YTpi' } })).code, 'invalid_token');
  const forged = 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl';
  t.equal((await kiln.api('GET', '/user', { token: forged })).status, 401);
});

t.test('a session of a disabled account or an expired session is refused', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  await kiln.sql`update sessions set expires_at = now() - interval '1 second'`;
  const expired = await kiln.api('GET', '/user', { token: ada.token });
  t.same([expired.status, expired.code], [401, 'token_expired']);
  const fresh = await login(kiln, 'ada', ada.password);
  await kiln.sql`update users set disabled = true`;
  const disabled = await kiln.api('GET', '/user', { token: fresh });
  t.same([disabled.status, disabled.code], [403, 'account_disabled']);
});

t.test('username and e-mail conflicts, and the username check', async (t) => {
  const kiln = await startTestKiln(t);
  await registerUser(kiln, 'ada');
  const register = (body: unknown) => kiln.api('POST', '/auth/basic/register', { body, headers: freshAddress() });
  const sameName = await register({ username: 'ADA', email: 'other@example.test', password: 'long enough' });
  t.same([sameName.status, sameName.code], [409, 'username_taken'], 'usernames are case-insensitive');
  const sameEmail = await register({ username: 'eve', email: 'Ada@Example.test', password: 'long enough' });
  t.same([sameEmail.status, sameEmail.code], [409, 'email_taken']);
  const check = (username: unknown) => kiln.api<{ available: boolean }>('POST', '/auth/check-username', { body: { username }, headers: freshAddress() });
  t.equal((await check('ada')).message.available, false);
  t.equal((await check('grace')).message.available, true);
  const bad = await check('no spaces');
  t.same([bad.status, bad.code], [400, 'invalid_body']);
  t.match(bad.message, /^username: /);
  t.equal((await kiln.sql`select 1 from users`).length, 1, 'nothing written');
});

t.test('bad register and login bodies: 400 naming the field, nothing written', async (t) => {
  const kiln = await startTestKiln(t);
  const ok = { username: 'ada', name: 'Ada', email: 'ada@example.test', password: 'long enough' };
  const cases: [string, unknown, RegExp][] = [
    ['missing username', { ...ok, username: undefined }, /^username: /],
    ['username of wrong type', { ...ok, username: 42 }, /^username: .*expected string/],
    ['username too long', { ...ok, username: 'a'.repeat(64) }, /^username: /],
    ['username with a slash', { ...ok, username: 'a/b' }, /^username: /],
    ['missing email', { ...ok, email: undefined }, /^email: /],
    ['not an email', { ...ok, email: 'ada' }, /^email: must be an e-mail address/],
    ['email too long', { ...ok, email: `${'a'.repeat(250)}@x.io` }, /^email: /],
    ['short password', { ...ok, password: 'short' }, /^password: must be at least 8/],
    ['password too long', { ...ok, password: 'p'.repeat(1025) }, /^password: /],
    ['name too long', { ...ok, name: 'n'.repeat(201) }, /^name: /],
    ['name of wrong type', { ...ok, name: ['Ada'] }, /^name: /],
    ['unknown field', { ...ok, admin: true }, /Unrecognized key: "admin"/],
    ['not an object', [ok], /expected object/],
  ];
  for (const [what, body, message] of cases) {
    const res = await kiln.api('POST', '/auth/basic/register', { body, headers: freshAddress() });
    t.equal(res.status, 400, what);
    t.equal(res.code, 'invalid_body', what);
    t.match(res.message, message, what);
  }
  const notJson = await kiln.api('POST', '/auth/basic/register', { body: '{"username":', headers: freshAddress() });
  t.same([notJson.status, notJson.code], [400, 'invalid_json']);
  t.equal((await kiln.sql`select 1 from users`).length, 0, 'nothing written');

  for (const [what, body, message] of [
    ['missing password', { loginname: 'ada' }, /^password: /],
    ['loginname of wrong type', { loginname: 1, password: 'x' }, /^loginname: /],
    ['empty loginname', { loginname: '', password: 'x' }, /^loginname: /],
  ] as [string, unknown, RegExp][]) {
    const res = await kiln.api('POST', '/auth/basic/login', { body, headers: freshAddress() });
    t.same([res.status, res.code], [400, 'invalid_body'], what);
    t.match(res.message, message, what);
  }
  t.equal((await kiln.sql`select 1 from sessions`).length, 0, 'no session written');
});

t.test('registration.enable=false refuses registration; login still works', async (t) => {
  const kiln = await startTestKiln(t, { 'registration.enable': false });
  const res = await kiln.api('POST', '/auth/basic/register', { body: { username: 'ada', email: 'ada@example.test', password: 'long enough' }, headers: freshAddress() });
  t.same([res.status, res.code], [403, 'registration_disabled']);
  t.equal((await kiln.sql`select 1 from users`).length, 0);
});

t.test('oidc.required turns password sign-in and registration off', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'kiln-oidc-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'secret'), 'client secret');
  const kiln = await startTestKiln(t, {
    'oidc.enable': true, 'oidc.required': true, 'oidc.clientId': 'kiln', 'oidc.clientSecretFile': join(dir, 'secret'),
    // never contacted: password sign-in is refused before anything asks the provider
    'oidc.discoveryUrl': 'http://127.0.0.1:9/',
  });
  const reg = await kiln.api('POST', '/auth/basic/register', { body: { username: 'ada', email: 'ada@example.test', password: 'long enough' }, headers: freshAddress() });
  t.same([reg.status, reg.code], [403, 'oidc_required']);
  const res = await kiln.api('POST', '/auth/basic/login', { body: { loginname: 'ada', password: 'long enough' }, headers: freshAddress() });
  t.same([res.status, res.code], [403, 'oidc_required']);
});

t.test('rate limits: a token bucket per client address, 429 with Retry-After', async (t) => {
  const kiln = await startTestKiln(t);
  const from = freshAddress();
  const statuses: number[] = [];
  let limited: Awaited<ReturnType<typeof kiln.api>> | undefined;
  for (let i = 0; i < 11 && !limited; i++) {
    const res = await kiln.api('POST', '/auth/basic/register', { body: { username: `u${i}` }, headers: from });
    statuses.push(res.status);
    if (res.status === 429) limited = res;
  }
  t.same(statuses, [...Array(10).fill(400), 429], 'burst of 10 registrations, bad bodies included');
  t.equal(limited!.code, 'rate_limited');
  t.ok(Number(limited!.headers.get('retry-after')) >= 1, 'Retry-After in seconds');
  const elsewhere = await kiln.api('POST', '/auth/basic/register', { body: { username: 'x' }, headers: freshAddress() });
  t.equal(elsewhere.status, 400, 'another address has its own bucket');
  const login = await kiln.api('POST', '/auth/basic/login', { body: { loginname: 'x', password: 'y' }, headers: from });
  t.equal(login.status, 401, 'login has its own bucket');
});

t.test('rate limits in Redis when redis.url is set', async (t) => {
  const kiln = await startTestKiln(t, { 'redis.url': process.env['KILN_TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379' });
  // Buckets in Redis outlive the test: a random address keeps runs apart.
  const from = { 'x-forwarded-for': `2001:db8::${randomBytes(2).toString('hex')}:${randomBytes(2).toString('hex')}` };
  const statuses: number[] = [];
  for (let i = 0; i < 11; i++) statuses.push((await kiln.api('POST', '/auth/basic/register', { body: {}, headers: from })).status);
  t.same(statuses, [...Array(10).fill(400), 429]);
});
