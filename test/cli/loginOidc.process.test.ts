// `kiln login` against a server that signs in only by OIDC (a real OpenID provider on loopback):
// it prints the provider's address and asks for the session token the sign-in shows, without
// echoing it. The test plays the browser: it follows the printed address through the provider
// and kiln's callback, and types the token from the fragment into the pseudo-terminal.
import t from 'tap';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, startTestKiln } from '../support/kiln.js';
import { startOidcProvider } from '../support/oidcProvider.js';
import { kilnCli, startKilnCli } from '../support/kilnCli.js';

t.test('kiln login on an OIDC-only server prints the address and takes the token', async (t) => {
  const port = await freePort();
  const provider = await startOidcProvider(t, [`http://127.0.0.1:${port}/api/v1/auth/oidc/callback`]);
  provider.accounts.set('sub-alice', { email: 'alice@example.test', email_verified: true, preferred_username: 'alice', name: 'Alice' });
  const dir = await mkdtemp(join(tmpdir(), 'kiln-cli-oidc-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'client-secret'), provider.clientSecret);
  const kiln = await startTestKiln(t, {
    port, 'oidc.enable': true, 'oidc.required': true, 'oidc.clientId': provider.clientId, 'oidc.clientSecretFile': join(dir, 'client-secret'),
    'oidc.discoveryUrl': `${provider.issuer}/.well-known/openid-configuration`,
  });
  const env = { HOME: dir };

  const session = startKilnCli(['login', '--server', kiln.url], env, { terminal: true });
  const shown = await session.waitFor(/paste the session token the sign-in shows: $/);
  const address = /Open this address in a browser and sign in:\s+(\S+)/.exec(shown)?.[1];
  t.ok(address?.startsWith(`${provider.issuer}/auth?`), `the provider's address: ${address}`);

  provider.signInAs('sub-alice');
  const callback = await provider.walk(address!);
  const res = await fetch(callback, { redirect: 'manual' });
  t.equal(res.status, 302);
  const token = new URLSearchParams(new URL(res.headers.get('location')!).hash.slice(1)).get('token')!;
  t.ok(token, 'the sign-in handed over a session token');

  session.write(`${token}\r`);
  const run = await session.done;
  t.equal(run.status, 0, run.stdout);
  t.match(run.stdout, /logged in to .* as alice/);
  t.notOk(run.stdout.includes(token), 'the token is not echoed');
  const who = await kilnCli(['whoami', '--json'], env);
  t.match(who.json, { username: 'alice', server: kiln.url });

  const password = await kilnCli(['login', '--server', kiln.url], env, 'alice\nsecret\n');
  t.equal(password.status, 1, 'no password sign-in asked for here: the pasted "token" is refused');
});
