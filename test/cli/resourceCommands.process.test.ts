// The client commands for accounts, organizations, projects, tasks, API keys, webhooks and worker
// tokens (docs/cli.md), as child processes against one real server, their JSON parsed; the login
// prompt also in a pseudo-terminal, where the password must not be echoed.
import t from 'tap';
import { createServer } from 'node:http';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestKiln } from '../support/kiln.js';
import { registerUser, signUp } from '../support/accounts.js';
import { kilnCli, startKilnCli } from '../support/kilnCli.js';

// Dozens of CLI processes, each a few seconds to start under CI's load: past tap's 300 s per file.
t.setTimeout(600_000);

t.test('kiln login, whoami, org, project, task, key, webhook and worker register', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await registerUser(kiln, 'ada', 'correct horse battery');
  const bob = await signUp(kiln, 'bob');
  const dir = mkdtempSync(join(tmpdir(), 'kiln-cli-home-'));
  const env = { HOME: dir, XDG_CONFIG_HOME: join(dir, 'config') };

  await t.test('whoami without a login: refused as usage (2)', async (t) => {
    const run = await kilnCli(['whoami', '--json'], env);
    t.equal(run.status, 2);
    t.match(run.json, { error: true, code: 'not_configured' });
  });

  await t.test('login asks for the user name and password (piped)', async (t) => {
    const wrong = await kilnCli(['login', '--server', kiln.url, '--json'], env, 'ada\nnot the password\n');
    t.equal(wrong.status, 1);
    t.match(wrong.json, { error: true, code: 'invalid_credentials' });
    const ended = await kilnCli(['login', '--server', kiln.url], env, 'ada\n');
    t.equal(ended.status, 2, 'the input ended before the password');
    t.match(ended.stderr, /no answer to "Password:"/);
    const run = await kilnCli(['login', '--server', kiln.url, '--json'], env, 'ada\ncorrect horse battery\n');
    t.equal(run.status, 0, run.stderr);
    t.match(run.json, { server: kiln.url, user: 'ada' });
    t.match(run.stderr, /User name: Password: /);
    const who = await kilnCli(['whoami', '--json'], env);
    t.equal(who.status, 0, who.stderr);
    t.match(who.json, { server: kiln.url, username: 'ada', id: ada.id });
    t.match((await kilnCli(['whoami'], env)).stdout, /^User: +ada$/m);
  });

  await t.test('login in a terminal: the user name is echoed, the password is not', async (t) => {
    const home = mkdtempSync(join(tmpdir(), 'kiln-cli-tty-'));
    const session = startKilnCli(['login', '--server', kiln.url], { HOME: home }, { terminal: true });
    await session.waitFor(/User name: $/);
    session.write('ada\r');
    await session.waitFor(/Password: $/);
    session.write('correct horse battery\r');
    const run = await session.done;
    t.equal(run.status, 0, run.stdout);
    t.match(run.stdout, /User name: ada\r*\n/);
    t.notMatch(run.stdout, /correct horse/, 'the password never reaches the terminal');
    t.match(run.stdout, /logged in to .* as ada/);
  });

  await t.test('login --oidc on a server without OIDC: refused, saying so', async (t) => {
    const run = await kilnCli(['login', '--server', kiln.url, '--oidc'], env);
    t.equal(run.status, 2);
    t.match(run.stderr, /has no OIDC sign-in/);
  });

  await kiln.api('PUT', '/caches', { token: bob.token, body: { name: 'bobs' } });

  await t.test('org create, list, show; bob cannot see it', async (t) => {
    const made = await kilnCli(['org', 'create', 'acme', '--display-name', 'Acme Corp', '--json'], env);
    t.equal(made.status, 0, made.stderr);
    t.match(made.json, { name: 'acme', display_name: 'Acme Corp', role: 'Admin' });
    const list = await kilnCli(['org', 'list', '--json'], env);
    t.same((list.json as { name: string }[]).map((o) => o.name), ['acme']);
    const table = await kilnCli(['org', 'list'], env);
    t.match(table.stdout, /^NAME\s+DISPLAY NAME\s+ROLE\s+CREATED\nacme\s+Acme Corp\s+Admin\s+/);
    t.match((await kilnCli(['org', 'show', 'acme'], env)).stdout, /^Name: +acme$/m);
    const asBob = await kilnCli(['org', 'show', 'acme', '--json'], { ...env, KILN_SERVER: kiln.url, KILN_TOKEN: bob.token });
    t.equal(asBob.status, 1);
    t.match(asBob.json, { error: true, code: 'not_found' });
    const again = await kilnCli(['org', 'create', 'acme'], env);
    t.equal(again.status, 1);
    t.match(again.stderr, /^kiln: /);
  });

  await t.test('project create with a cache, list, show; task list', async (t) => {
    const cache = await kilnCli(['cache', 'list', '--json'], env);
    t.same(cache.json, [], 'ada has no cache yet');
    const cacheMade = await kilnCli(['cache', 'create', 'main', '--json'], env);
    t.equal(cacheMade.status, 0, cacheMade.stderr);
    t.match(cacheMade.json, { name: 'main', public: false, public_key: /^\S+-main-1:\S+$/ });
    t.equal((await kilnCli(['cache', 'create', 'x', '--priority', 'high'], env)).status, 2);
    const made = await kilnCli(['project', 'create', 'acme/app', '--repository', 'file:///nonexistent', '--wildcard', 'packages.x86_64-linux.*', '--cache', 'main', '--json'], env);
    t.equal(made.status, 0, made.stderr);
    t.match(made.json, { organization: 'acme', name: 'app', repository: 'file:///nonexistent', subscribed: [{ cache: 'main' }] });
    const list = await kilnCli(['project', 'list', 'acme', '--json'], env);
    t.same((list.json as { name: string }[]).map((p) => p.name), ['app']);
    const show = await kilnCli(['project', 'show', 'acme/app', '--json'], env);
    t.match(show.json, { project: { name: 'app' }, tasks: [{ name: 'default' }], subscriptions: { subscriptions: [{ cache: 'main', mode: 0 }] } });
    const text = await kilnCli(['project', 'show', 'acme/app'], env);
    t.match(text.stdout, /^Repository: +file:\/\/\/nonexistent$/m);
    t.match(text.stdout, /^main +read-write +project$/m);
    const tasks = await kilnCli(['task', 'list', 'acme/app', '--json'], env);
    t.equal(tasks.status, 0, tasks.stderr);
    t.same((tasks.json as { name: string }[]).map((x) => x.name), ['default']);
    const byId = await kilnCli(['task', 'list', (made.json as { id: string }).id, '--json'], env);
    t.same(byId.json, tasks.json, 'the project by its UUID');
    const bad = await kilnCli(['project', 'show', 'app'], env);
    t.equal(bad.status, 2);
    t.match(bad.stderr, /name a project as <org>\/<project>/);
    const foreign = await kilnCli(['project', 'create', 'acme/other', '--repository', 'file:///x', '--cache', 'bobs', '--json'], env);
    t.equal(foreign.status, 1, 'a cache ada cannot see');
    t.match(foreign.json, { code: 'not_found', message: /^the project was not created: / });
    t.same(((await kilnCli(['project', 'list', 'acme', '--json'], env)).json as { name: string }[]).map((p) => p.name), ['app'], 'nothing half made');
  });

  await t.test('key create (secret once), list, use, delete', async (t) => {
    const made = await kilnCli(['key', 'create', 'ci', '-p', 'viewProject', '-p', 'viewCache', '--expires-in-days', '30', '--json'], env);
    t.equal(made.status, 0, made.stderr);
    const secret = (made.json as { secret: string }).secret;
    t.match(made.json, { name: 'ci', permissions: ['viewProject', 'viewCache'], secret: /^SVC/ });
    const list = await kilnCli(['key', 'list', '--json'], env);
    t.match(list.json, [{ name: 'ci', prefix: secret.slice(0, 6) }]);
    t.notMatch(list.stdout, secret, 'never the secret again');
    const keyEnv = { ...env, KILN_SERVER: kiln.url, KILN_TOKEN: secret };
    t.match((await kilnCli(['whoami', '--json'], keyEnv)).json, { username: 'ada' });
    t.equal((await kilnCli(['key', 'create', 'x', '--json'], env)).status, 2, 'no permission named');
    t.equal((await kilnCli(['key', 'create', 'x', '-p', 'flying', '--json'], env)).status, 1);
    const unconfirmed = await kilnCli(['key', 'delete', 'ci', '--json'], env);
    t.match(unconfirmed.json, { code: 'confirmation_required' });
    const deleted = await kilnCli(['key', 'delete', 'ci', '--yes', '--json'], env);
    t.equal(deleted.status, 0, deleted.stderr);
    const after = await kilnCli(['whoami', '--json'], keyEnv);
    t.equal(after.status, 1, 'the deleted key no longer works');
  });

  await t.test('webhook create, list, test, deliveries', async (t) => {
    const received: { headers: Record<string, unknown>; body: string }[] = [];
    const receiver = createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        received.push({ headers: req.headers, body });
        res.end('ok');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    t.teardown(() => receiver.close());
    const url = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;
    const noScope = await kilnCli(['webhook', 'list', '--json'], env);
    t.equal(noScope.status, 2);
    t.match(noScope.json, { message: /exactly one of --project/ });
    const made = await kilnCli(['webhook', 'create', url, '--project', 'acme/app', '-e', 'build.*', '-e', 'webhook.*', '--json'], env);
    t.equal(made.status, 0, made.stderr);
    const hook = made.json as { id: string; secret: string };
    t.match(hook, { url, events: ['build.*', 'webhook.*'], active: true, secret: /\S{16,}/ });
    const list = await kilnCli(['webhook', 'list', '--project', 'acme/app', '--json'], env);
    t.match(list.json, [{ id: hook.id, url }]);
    t.notOk('secret' in (list.json as object[])[0]!, 'the secret is not listed');
    const tested = await kilnCli(['webhook', 'test', hook.id, '--project', 'acme/app', '--json'], env);
    t.equal(tested.status, 0, tested.stdout);
    t.match(tested.json, { event: 'webhook.ping', status: 'delivered', last_response_status: 200 });
    t.equal(received.length, 1);
    t.match(received[0]!.body, /webhook\.ping/);
    const deliveries = await kilnCli(['webhook', 'deliveries', hook.id, '--project', 'acme/app', '--json'], env);
    t.match(deliveries.json, { total: 1, deliveries: [{ event: 'webhook.ping', status: 'delivered' }] });
    const text = await kilnCli(['webhook', 'deliveries', hook.id, '--project', 'acme/app'], env);
    t.match(text.stdout, /webhook\.ping\s+delivered\s+1\/\d+\s+200/);
    const asBob = await kilnCli(['webhook', 'list', '--project', 'acme/app', '--json'], { ...env, KILN_SERVER: kiln.url, KILN_TOKEN: bob.token });
    t.equal(asBob.status, 1);
  });

  await t.test('worker register prints the peer token once', async (t) => {
    const made = await kilnCli(['worker', 'register', 'acme/app', '--name', 'builder-1', '--json'], env);
    t.equal(made.status, 0, made.stderr);
    t.match(made.json, { name: 'builder-1', token: /\S{40,}/ });
    const text = await kilnCli(['worker', 'register', 'acme/app'], env);
    t.equal(text.status, 0, text.stderr);
    t.match(text.stderr, /shown only now/);
    t.match(text.stdout.trim(), /^\S{40,}$/, 'stdout is the token alone, for a script');
    const rows = await kiln.sql<{ name: string }[]>`select name from worker_registrations order by created_at`;
    t.equal(rows.length, 2);
  });

  await t.test('usage errors exit 2; project and org delete ask first', async (t) => {
    t.equal((await kilnCli(['org', 'show'], env)).status, 2, 'a missing argument');
    t.equal((await kilnCli(['project', 'list', 'acme', '--bogus'], env)).status, 2, 'an unknown option');
    t.equal((await kilnCli(['eval', 'show', 'not-a-uuid'], env)).status, 2);
    const declined = await kilnCli(['project', 'delete', 'acme/app'], env, 'n\n');
    t.equal(declined.status, 2);
    t.match(declined.stderr, /Delete project "acme\/app"/);
    const deleted = await kilnCli(['project', 'delete', 'acme/app', '--yes', '--json'], env);
    t.equal(deleted.status, 0, deleted.stderr);
    t.same((await kilnCli(['project', 'list', 'acme', '--json'], env)).json, []);
    const org = await kilnCli(['org', 'delete', 'acme', '-y', '--json'], env);
    t.equal(org.status, 0, org.stderr);
    t.same((await kilnCli(['org', 'list', '--json'], env)).json, []);
  });
});
