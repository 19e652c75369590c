import t from 'tap';
import { startTestKiln } from '../../../support/kiln.js';
import { freshAddress, login, signUp } from '../../../support/accounts.js';

interface Settings {
  username: string;
  name: string;
  email: string;
  email_verified: boolean;
  preferences: Record<string, unknown>;
}

t.test('GET /user and DELETE /user', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  const me = await kiln.api<Record<string, unknown>>('GET', '/user', { token: ada.token });
  t.match(me.message, { id: ada.id, username: 'ada', name: 'ADA', email: 'ada@example.test', superuser: true, has_password: true, oidc_linked: false });
  await kiln.api('POST', '/user/keys', { token: ada.token, body: { name: 'k', permissions: ['viewProject'] } });

  await kiln.sql`update users set state_managed = true`;
  const declared = await kiln.api('DELETE', '/user', { token: ada.token });
  t.same([declared.status, declared.code], [403, 'state_managed']);
  await kiln.sql`update users set state_managed = false`;

  const del = await kiln.api('DELETE', '/user', { token: ada.token });
  t.equal(del.status, 200);
  t.equal((await kiln.sql`select 1 from users`).length, 0);
  t.equal((await kiln.sql`select 1 from api_keys`).length, 0, 'keys go with the account');
  t.equal((await kiln.sql`select 1 from sessions`).length, 0, 'sessions go with the account');
  t.equal((await kiln.api('GET', '/user', { token: ada.token })).status, 401);
});

t.test('GET and PATCH /user/settings', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  const other = await login(kiln, 'ada', ada.password);
  await kiln.sql`update users set email_verified = true`;
  const get = async () => (await kiln.api<Settings>('GET', '/user/settings', { token: ada.token })).message;
  t.match(await get(), { username: 'ada', name: 'ADA', email: 'ada@example.test', email_verified: true, preferences: {} });

  const patch = (body: unknown, token = ada.token) => kiln.api<Settings>('PATCH', '/user/settings', { token, body });
  const named = await patch({ name: 'Ada King', preferences: { theme: 'dark', pageSize: 50 } });
  t.equal(named.status, 200);
  t.match(named.message, { name: 'Ada King', preferences: { theme: 'dark', pageSize: 50 }, email_verified: true });
  t.same((await patch({ preferences: { theme: null, compact: true } })).message.preferences, { pageSize: 50, compact: true }, 'merged; null removes');

  const mail = await patch({ email: 'countess@example.test' });
  t.match(mail.message, { email: 'countess@example.test', email_verified: false }, 'a new address needs verifying');

  const bob = await signUp(kiln, 'bob');
  const taken = await patch({ email: 'bob@example.test' });
  t.same([taken.status, taken.code], [409, 'email_taken']);

  const wrong = await patch({ current_password: 'not it', new_password: 'new password 1' });
  t.same([wrong.status, wrong.code], [403, 'wrong_password']);
  t.match(wrong.message, /^current_password: /);
  const changed = await patch({ current_password: ada.password, new_password: 'new password 1' });
  t.equal(changed.status, 200);
  t.equal((await kiln.api('GET', '/user', { token: other })).status, 401, 'other sessions are logged out');
  t.equal((await kiln.api('GET', '/user', { token: ada.token })).status, 200, 'the session that changed it lives on');
  const res = await kiln.api('POST', '/auth/basic/login', { body: { loginname: 'ada', password: 'new password 1' }, headers: freshAddress() });
  t.equal(res.status, 200, 'the new password signs in');
  t.equal((await kiln.api('GET', '/user/settings', { token: bob.token })).status, 200);
});

t.test('bad settings bodies: 400 naming the field, nothing written', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  const before = await kiln.sql`select * from users`;
  const cases: [string, unknown, RegExp][] = [
    ['name of wrong type', { name: 1 }, /^name: /],
    ['overlong name', { name: 'n'.repeat(201) }, /^name: /],
    ['not an e-mail', { email: 'countess' }, /^email: /],
    ['new password without the current one', { new_password: 'long enough' }, /^current_password: is required/],
    ['short new password', { current_password: 'x', new_password: 'short' }, /^new_password: /],
    ['preferences not an object', { preferences: 'dark' }, /^preferences: /],
    ['a preference of an odd type', { preferences: { theme: { nested: true } } }, /^preferences\.theme: /],
    ['too many preferences', { preferences: Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, i])) }, /^preferences: at most 32/],
    ['username cannot change', { username: 'eve' }, /Unrecognized key: "username"/],
  ];
  for (const [what, body, message] of cases) {
    const res = await kiln.api('PATCH', '/user/settings', { token: ada.token, body });
    t.same([res.status, res.code], [400, 'invalid_body'], what);
    t.match(res.message, message, what);
  }
  t.same(await kiln.sql`select * from users`, before, 'nothing written');
});
