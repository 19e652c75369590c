// GET /admin/users and /admin/sessions: every account with its active sessions, and the sessions,
// a page at a time, for superusers only (the first account is one); the shapes are protocol/api's
// AdminUsersPage and AdminSessionsPage; malformed paging is a 400 naming the field.
import t from 'tap';
import { AdminSessionsPage, AdminUsersPage } from '../../../../protocol/api/adminAccounts.js';
import { login, signUp } from '../../../support/accounts.js';
import { startTestKiln } from '../../../support/kiln.js';

t.test('superusers list accounts and sessions', async (t) => {
  const kiln = await startTestKiln(t);
  const root = await signUp(kiln, 'root');
  const ada = await signUp(kiln, 'ada');
  const bob = await signUp(kiln, 'bob_1');
  const adaSecond = await login(kiln, 'ada', ada.password);
  t.equal((await kiln.api('POST', '/auth/logout', { token: adaSecond })).status, 200);
  const get = (path: string, token = root.token) => kiln.api('GET', path, { token });

  const users = AdminUsersPage.parse((await get('/admin/users')).message);
  t.match(users, { page: 1, per_page: 50, total: 3 });
  t.same(users.users.map((u) => u.username), ['ada', 'bob_1', 'root'], 'by username');
  t.match(users.users[0], { email: 'ada@example.test', superuser: false, disabled: false, has_password: true, active_sessions: 1 }, 'a logged-out session is not active');
  t.match(users.users[2], { superuser: true });
  t.same(AdminUsersPage.parse((await get('/admin/users?per_page=1&page=2')).message).users.map((u) => u.username), ['bob_1'], 'paged');
  t.same(AdminUsersPage.parse((await get('/admin/users?search=BOB')).message).users.map((u) => u.username), ['bob_1'], 'search: part of the username, any case');
  t.same(AdminUsersPage.parse((await get('/admin/users?search=ada%40example')).message).users.map((u) => u.username), ['ada'], 'search: the e-mail');
  t.same(AdminUsersPage.parse((await get('/admin/users?search=b_')).message).users.map((u) => u.username), ['bob_1'], '_ is taken literally');
  t.same(AdminUsersPage.parse((await get('/admin/users?search=%25')).message).total, 0, '% is taken literally');

  const active = AdminSessionsPage.parse((await get('/admin/sessions')).message);
  t.match(active, { total: 3 }, 'one active session each');
  t.same(active.sessions.map((s) => s.user), ['bob_1', 'ada', 'root'], 'newest first');
  t.same(active.sessions.map((s) => s.current), [false, false, true], "the caller's own session is marked");
  const adas = AdminSessionsPage.parse((await get('/admin/sessions?user=ada&state=all')).message);
  t.equal(adas.total, 2, 'state=all keeps revoked sessions');
  t.ok(adas.sessions[0]!.revoked_at, 'the newest, logged out, is revoked');
  t.equal(adas.sessions[1]!.revoked_at, null);
  t.equal((await get('/admin/sessions?user=nobody')).status, 404, 'an unknown user is a 404');

  for (const [path, field] of [
    ['/admin/users?page=0', 'page'], ['/admin/users?per_page=201', 'per_page'], ['/admin/users?order=name', 'order'],
    [`/admin/users?search=${'x'.repeat(201)}`, 'search'], ['/admin/sessions?state=old', 'state'], ['/admin/sessions?user=%20bad', 'user'],
    ['/admin/sessions?page=x', 'page'],
  ] as const) {
    const res = await get(path);
    t.equal(res.status, 400, `${path.slice(0, 40)} is refused`);
    t.match(String(res.message), field, `the refusal names ${field}`);
  }
  t.equal((await get('/admin/users', ada.token)).status, 403, 'not for other accounts');
  t.match((await get('/admin/sessions', bob.token)).message, /only superusers/);
  t.equal((await kiln.api('GET', '/admin/users')).status, 401, 'no credential');
});
