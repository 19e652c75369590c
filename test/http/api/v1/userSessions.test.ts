// GET /user/sessions and DELETE /user/sessions/{session} (kiln extension, docs/auth.md "Your
// sessions"): a user sees and revokes only their own active sessions; the current one is marked and
// revoking it logs out; last_used_at moves at most once a minute (an injected clock steps it); an
// API key may neither list nor revoke; another account's session, a superuser's reach included, is a 404.
import t from 'tap';
import { z } from 'zod';
import { UserSessionView } from '../../../../protocol/api/userSessions.js';
import { freshAddress, signUp } from '../../../support/accounts.js';
import { startTestKiln, type TestKiln } from '../../../support/kiln.js';

/** A clock the test moves by hand, starting now. */
function steppedClock() {
  let at = Date.now();
  return { now: () => new Date(at), step: (ms: number) => (at += ms) };
}

async function signIn(kiln: TestKiln, loginname: string, password: string, userAgent: string): Promise<{ token: string; address: string }> {
  const from = freshAddress();
  const res = await kiln.api<string>('POST', '/auth/basic/login', { body: { loginname, password }, headers: { ...from, 'user-agent': userAgent } });
  if (res.status !== 200) throw new Error(`login ${loginname}: ${res.status}`);
  return { token: res.message, address: from['x-forwarded-for']! };
}

t.test('a user lists and revokes their own sessions, and no one else\'s', async (t) => {
  const clock = steppedClock();
  const kiln = await startTestKiln(t, {}, { clock });
  const root = await signUp(kiln, 'root');
  const ada = await signUp(kiln, 'ada');
  const bob = await signUp(kiln, 'bob');
  clock.step(1000);
  const laptop = await signIn(kiln, 'ada', ada.password, 'Firefox/140 laptop');
  clock.step(1000);
  const phone = await signIn(kiln, 'ada', ada.password, 'Chromium/139 phone');
  const list = async (token: string) => {
    const res = await kiln.api('GET', '/user/sessions', { token });
    t.equal(res.status, 200);
    return z.array(UserSessionView).parse(res.message);
  };

  const seen = await list(laptop.token);
  t.equal(seen.length, 3, "ada's three sessions (sign-up's, laptop's, phone's), none of bob's or root's");
  t.same(seen.map((s) => s.user_agent?.slice(0, 12) ?? null), ['Chromium/139', 'Firefox/140 ', seen[2]!.user_agent], 'newest first');
  t.same(seen.map((s) => s.current), [false, true, false], 'the laptop session is the caller');
  t.equal(seen[1]!.address, laptop.address, 'the sign-in address');
  t.equal(seen[1]!.last_used_at, clock.now().toISOString(), 'the listing itself used the laptop session');
  t.equal(seen[0]!.last_used_at, null, 'the phone has made no request since sign-in');
  const phoneId = seen[0]!.id;
  const [bobs] = await kiln.sql<{ id: string }[]>`select id from sessions where user_id = ${bob.id}`;
  const [roots] = await kiln.sql<{ id: string }[]>`select id from sessions where user_id = ${root.id}`;

  // last used: written at most once a minute
  const firstUse = clock.now().toISOString();
  clock.step(30_000);
  t.equal((await list(laptop.token))[1]!.last_used_at, firstUse, 'not written again within the minute');
  clock.step(31_000);
  const later = clock.now().toISOString();
  t.equal((await list(laptop.token))[1]!.last_used_at, later, 'written again once the minute is past');

  // another account's session: a 404 like one that never was, and it lives on
  const other = await kiln.api('DELETE', `/user/sessions/${bobs!.id}`, { token: laptop.token });
  t.match(other, { status: 404, code: 'session_not_found' }, "bob's session is not ada's to revoke");
  t.equal((await kiln.api('GET', '/user', { token: bob.token })).status, 200, "bob's session still works");
  t.match(await kiln.api('DELETE', `/user/sessions/${phoneId}`, { token: root.token }), { status: 404, code: 'session_not_found' }, 'a superuser does not reach it here either');
  t.same((await list(root.token)).map((s) => s.id), [roots!.id], 'root sees only their own');
  t.match(await kiln.api('DELETE', `/user/sessions/${crypto.randomUUID()}`, { token: laptop.token }), { status: 404, code: 'session_not_found' });
  const malformed = await kiln.api('DELETE', '/user/sessions/not-a-uuid', { token: laptop.token });
  t.match(malformed, { status: 400, code: 'invalid_parameter' }, 'a malformed id');
  t.match(String(malformed.message), /session/, 'the refusal names the parameter');
  t.equal((await kiln.api('GET', '/user/sessions')).status, 401, 'no credential');

  // an API key neither lists (sign-in addresses are the account's business) nor revokes
  const key = await kiln.api<{ secret: string }>('POST', '/user/keys', { token: ada.token, body: { name: 'ci', permissions: ['viewProject'] } });
  t.match(await kiln.api('GET', '/user/sessions', { token: key.message.secret }), { status: 403, code: 'session_required' });
  t.match(await kiln.api('DELETE', `/user/sessions/${phoneId}`, { token: key.message.secret }), { status: 403, code: 'session_required' });

  // revoking another of one's own sessions: its token is refused from then on
  const revoked = await kiln.api('DELETE', `/user/sessions/${phoneId}`, { token: laptop.token });
  t.same([revoked.status, revoked.message], [200, 'session revoked']);
  t.match(await kiln.api('GET', '/user', { token: phone.token }), { status: 401, code: 'invalid_token' }, "the phone's token is dead");
  t.notOk((await list(laptop.token)).some((s) => s.id === phoneId), 'no longer listed');
  t.match(await kiln.api('DELETE', `/user/sessions/${phoneId}`, { token: laptop.token }), { status: 404 }, 'a revoked session is not found again');
  const revokes = await kiln.sql<{ body: string }[]>`select body::text as body from event_outbox where event = 'session.revoke'`;
  const phoneRevoke = revokes.map((r) => r.body).find((b) => b.includes(phoneId));
  t.match(phoneRevoke, /"reason":"user_revoke"/, 'session.revoke says why');

  // revoking the current one is logging out
  const laptopId = (await list(laptop.token)).find((s) => s.current)!.id;
  t.same((await kiln.api('DELETE', `/user/sessions/${laptopId}`, { token: laptop.token })).message, 'logged out');
  t.match(await kiln.api('GET', '/user/sessions', { token: laptop.token }), { status: 401, code: 'invalid_token' });
  t.equal((await list(ada.token)).length, 1, "only the sign-up's session is left");
});
