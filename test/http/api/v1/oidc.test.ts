import t, { type Test } from 'tap';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { OptionPath } from '../../../../config/index.js';
import { freePort, startTestKiln, type TestKiln } from '../../../support/kiln.js';
import { freshAddress, registerUser } from '../../../support/accounts.js';
import { startOidcProvider, type TestOidcProvider } from '../../../support/oidcProvider.js';

const callbackOf = (port: number) => `http://127.0.0.1:${port}/api/v1/auth/oidc/callback`;

async function kilnWithOidc(t: Test, provider: TestOidcProvider, port: number, extra: Partial<Record<OptionPath, unknown>> = {}): Promise<TestKiln> {
  const dir = await mkdtemp(join(tmpdir(), 'kiln-oidc-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'client-secret'), provider.clientSecret);
  return startTestKiln(t, {
    port, 'oidc.enable': true, 'oidc.clientId': provider.clientId, 'oidc.clientSecretFile': join(dir, 'client-secret'),
    'oidc.discoveryUrl': `${provider.issuer}/.well-known/openid-configuration`, ...extra,
  });
}

/** The whole browser round trip; the fragment kiln's callback redirects to. */
async function signIn(kiln: TestKiln, provider: TestOidcProvider, subject: string): Promise<URLSearchParams> {
  provider.signInAs(subject);
  const authorize = await kiln.api<string>('POST', '/auth/oauth/authorize');
  const callback = await provider.walk(authorize.message);
  const res = await fetch(callback, { redirect: 'manual' });
  if (res.status !== 302) throw new Error(`callback answered ${res.status}: ${await res.text()}`);
  const location = new URL(res.headers.get('location')!);
  if (location.pathname !== '/auth/callback') throw new Error(`unexpected redirect ${location.href}`);
  return new URLSearchParams(location.hash.slice(1));
}

t.test('sign-in through a real OpenID provider', async (t) => {
  const port = await freePort();
  const provider = await startOidcProvider(t, [callbackOf(port)]);
  provider.accounts.set('sub-alice', { email: 'alice@example.test', email_verified: true, preferred_username: 'alice', name: 'Alice' });
  provider.accounts.set('sub-carol', { email: 'carol@example.test', email_verified: true, preferred_username: 'carol.c' });
  provider.accounts.set('sub-mallory', { email: 'dave@example.test', email_verified: false, preferred_username: 'dave' });
  const kiln = await kilnWithOidc(t, provider, port);

  const authorize = await kiln.api<string>('POST', '/auth/oauth/authorize');
  t.equal(authorize.status, 200);
  const url = new URL(authorize.message);
  t.equal(url.origin, provider.issuer);
  t.match(Object.fromEntries(url.searchParams), { client_id: 'kiln', redirect_uri: callbackOf(port), response_type: 'code', scope: 'openid email profile', code_challenge_method: 'S256', state: String, nonce: String });
  const redirect = await fetch(`${kiln.url}/api/v1/auth/oidc/login`, { redirect: 'manual' });
  t.equal(redirect.status, 302);
  t.match(redirect.headers.get('location'), new RegExp(`^${provider.issuer}/auth\\?`));

  const first = await signIn(kiln, provider, 'sub-alice');
  const token = first.get('token')!;
  t.ok(token, `a token in the fragment (${[...first.keys()].join(',')})`);
  const me = await kiln.api<Record<string, unknown>>('GET', '/user', { token });
  t.match(me.message, { username: 'alice', name: 'Alice', email: 'alice@example.test', email_verified: true, oidc_linked: true, has_password: false, superuser: true });
  const again = await signIn(kiln, provider, 'sub-alice');
  t.equal((await kiln.api<{ id: string }>('GET', '/user', { token: again.get('token')! })).message.id, me.message['id'], 'the same subject, the same account');

  const carol = await registerUser(kiln, 'carol');
  const linked = await signIn(kiln, provider, 'sub-carol');
  const carolMe = await kiln.api<Record<string, unknown>>('GET', '/user', { token: linked.get('token')! });
  t.match(carolMe.message, { id: carol.id, username: 'carol', oidc_linked: true, superuser: false }, 'a verified e-mail links the existing account');

  await registerUser(kiln, 'dave');
  const unverified = await signIn(kiln, provider, 'sub-mallory');
  const mallory = await kiln.api<Record<string, unknown>>('GET', '/user', { token: unverified.get('token')! });
  t.match(mallory.message, { username: 'dave-2', email: null }, 'an unverified claim to a taken address gets a new account without it');

  await kiln.sql`update users set disabled = true where username = 'alice'`;
  const disabled = await signIn(kiln, provider, 'sub-alice');
  t.same([disabled.get('error'), disabled.get('token')], ['account_disabled', null]);
});

t.test('failed callbacks come back to the frontend as an error', async (t) => {
  const port = await freePort();
  const provider = await startOidcProvider(t, [callbackOf(port)]);
  provider.accounts.set('sub-alice', { email: 'alice@example.test', email_verified: true });
  const kiln = await kilnWithOidc(t, provider, port);
  const fragment = async (query: string) => {
    const res = await fetch(`${callbackOf(port)}?${query}`, { redirect: 'manual' });
    return new URLSearchParams(new URL(res.headers.get('location')!).hash.slice(1));
  };
  const denied = await fragment('error=access_denied&error_description=no+thanks&state=x');
  t.equal(denied.get('error'), 'oidc_failed');
  t.match(denied.get('message'), /access_denied: no thanks/);
  t.match((await fragment('code=abc&state=unknown')).get('message'), /unknown or expired sign-in attempt/);

  provider.signInAs('sub-alice');
  const callback = await provider.walk((await kiln.api<string>('POST', '/auth/oauth/authorize')).message);
  t.equal((await fetch(callback, { redirect: 'manual' })).status, 302);
  const replay = await fetch(callback, { redirect: 'manual' });
  t.match(new URL(replay.headers.get('location')!).hash, /error=oidc_failed/, 'a callback works once');

  await kiln.sql`update oidc_logins set expires_at = now() - interval '1 second'`;
  provider.signInAs('sub-alice');
  const authorize = await kiln.api<string>('POST', '/auth/oauth/authorize');
  await kiln.sql`update oidc_logins set expires_at = now() - interval '1 second'`;
  const late = await fetch(await provider.walk(authorize.message), { redirect: 'manual' });
  t.match(new URL(late.headers.get('location')!).hash, /expired/, 'an attempt older than 10 minutes is refused');
});

t.test('oidc.required: OIDC only; without the frontend the callback answers the token itself', async (t) => {
  const port = await freePort();
  const provider = await startOidcProvider(t, [callbackOf(port)]);
  provider.accounts.set('sub-alice', { email: 'alice@example.test', email_verified: true, preferred_username: 'alice' });
  const kiln = await kilnWithOidc(t, provider, port, { 'oidc.required': true, 'frontend.enable': false });
  const login = await kiln.api('POST', '/auth/basic/login', { body: { loginname: 'alice', password: 'whatever1' }, headers: freshAddress() });
  t.same([login.status, login.code], [403, 'oidc_required']);
  provider.signInAs('sub-alice');
  const callback = await provider.walk((await kiln.api<string>('POST', '/auth/oauth/authorize')).message);
  const res = await fetch(callback);
  const body = (await res.json()) as { error: boolean; message: string };
  t.equal(res.status, 200);
  t.equal((await kiln.api<{ username: string }>('GET', '/user', { token: body.message })).message.username, 'alice');
  const bad = await kiln.api('GET', '/auth/oidc/callback?state=nope&code=x');
  t.same([bad.status, bad.code], [400, 'oidc_failed']);
});

t.test('OIDC routes when OIDC is off, or the provider is unreachable', async (t) => {
  const off = await startTestKiln(t);
  const res = await off.api('POST', '/auth/oauth/authorize');
  t.same([res.status, res.code], [404, 'oidc_disabled']);
  const port = await freePort();
  const gone = await kilnWithOidc(t, { clientId: 'kiln', clientSecret: 's', issuer: `http://127.0.0.1:${await freePort()}` } as TestOidcProvider, port);
  const down = await gone.api('POST', '/auth/oauth/authorize');
  t.same([down.status, down.code], [503, 'oidc_unavailable']);
  t.match(down.message, /did not answer discovery/);
});
