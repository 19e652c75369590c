// The admin pages (instance webhooks, the supervision tree, the workers board, the event firehose),
// the 403 page for everyone else, and OIDC sign-in, in real Chromium against one real kiln serve.
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import t, { type Test } from 'tap';
import { createMachine } from 'xstate';
import { DeliveryPage, WebhookView } from '../../protocol/index.js';
import { ActorTransitionView, ConnectedWorkerView, SupervisorNodeView } from '../../protocol/api/admin.js';
import { login, signUp } from '../support/accounts.js';
import { launchBrowser, openPage, screenshot, seriousAccessibilityViolations } from '../support/browser.js';
import { openLive, startReceiver } from '../support/events.js';
import { freePort, startTestKiln } from '../support/kiln.js';
import { startOidcProvider } from '../support/oidcProvider.js';
import { handshake, testHello } from '../support/protoClient.js';

// A machine whose action throws on `crash`: its supervisor restarts it (as test/http/api/v1/adminActors.test.ts does).
const fragile = createMachine({
  id: 'fragile',
  initial: 'idle',
  states: { idle: { on: { crash: { actions: () => { throw new Error('boom'); } } } } },
});

/** What a value breaks of a schema: no issues when it fits. */
const issues = (schema: { safeParse(v: unknown): { error?: { issues: { path: PropertyKey[]; message: string }[] } } }, value: unknown): string[] =>
  schema.safeParse(value).error?.issues.map((i) => `${i.path.map(String).join('.')}: ${i.message}`) ?? [];

t.test('admin pages and OIDC sign-in', async (t) => {
  const port = await freePort();
  const provider = await startOidcProvider(t, [`http://127.0.0.1:${port}/api/v1/auth/oidc/callback`]);
  provider.accounts.set('sub-olga', { email: 'olga@example.test', email_verified: true, preferred_username: 'olga', name: 'Olga' });
  const dir = await mkdtemp(join(tmpdir(), 'kiln-admin-ui-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'client-secret'), provider.clientSecret);
  const kiln = await startTestKiln(t, {
    port, 'oidc.enable': true, 'oidc.clientId': provider.clientId, 'oidc.clientSecretFile': join(dir, 'client-secret'),
    'oidc.discoveryUrl': `${provider.issuer}/.well-known/openid-configuration`,
    localWorker: true, // the board's worker connects from loopback in open mode
  });
  const browser = await launchBrowser(t);
  const ada = await signUp(kiln, 'ada'); // the first account is the superuser

  /** A page signed in as `token` (the session the sign-in form would store; signIn.test.ts tests the form). */
  async function signedIn(t: Test, b: Browser, token: string): Promise<{ page: Page; problems: string[] }> {
    const { page, problems } = await openPage(t, b);
    await page.addInitScript((value) => sessionStorage.setItem('kiln.session', value), token);
    return { page, problems };
  }

  t.test('the supervision tree is live: a killed child shows its restart, and its context on a click', async (t) => {
    const { page, problems } = await signedIn(t, browser, ada.token);
    await page.goto(kiln.url + '/admin/actors');
    await page.getByRole('heading', { name: 'Actors', exact: true }).waitFor();
    await page.locator('[data-actor="upload-budget"]').waitFor();
    await page.getByText('Live', { exact: false }).first().waitFor();
    await page.getByRole('navigation', { name: 'main' }).getByRole('link', { name: 'Admin' }).waitFor();
    t.pass('a superuser has Admin in the nav');

    // An actor spawned after the page loaded: it arrives over the live socket.
    const actor = kiln.root.spawn({ id: 'fragile-ui', kind: 'test-fragile', logic: fragile, input: undefined });
    t.teardown(() => kiln.root.stopChild('fragile-ui'));
    const row = page.locator('[data-actor="fragile-ui"]');
    await row.getByText('restarts: 0').waitFor();
    actor.send({ type: 'crash' });
    await row.getByText('restarts: 1').waitFor();
    t.pass('the restart shows without reloading the page');
    // The budget comes with the coalesced GET /admin/actors after the transition: waited for, not read at once.
    await page.locator('[data-actor="root"] > .line .budget').getByText(/budget: 1 of \d+ within/).waitFor();
    t.pass("the root's restart budget counts it");

    await row.getByRole('button', { name: 'fragile-ui' }).click();
    const detail = page.getByTestId('actor-detail');
    await detail.getByRole('heading', { name: 'fragile-ui' }).waitFor();
    t.match(await detail.textContent(), /test-fragile[\s\S]*Last crash[\s\S]*boom/, 'its kind and last crash');
    t.match(await detail.locator('.steps').textContent(), /xstate\.error[\s\S]*|xstate\.init/, 'the steps seen: the crash and the restart');
    await page.getByRole('button', { name: 'upload-budget' }).click();
    await page.getByTestId('actor-context').waitFor();
    t.match(await page.getByTestId('actor-context').textContent(), /bytesBudget/, "an actor's context is its summary");

    // The shapes the page reads, checked against the server's real answers.
    const tree = await kiln.api('GET', '/admin/actors', { token: ada.token });
    t.same(issues(SupervisorNodeView, tree.message), [], 'GET /admin/actors is a SupervisorNodeView');
    const feed = await openLive(kiln, '/admin/actors/live', ada.token);
    t.teardown(() => feed.close());
    actor.send({ type: 'crash' });
    await feed.waitFor(2);
    t.same(feed.frames.flatMap((f) => issues(ActorTransitionView, f.content)), [], 'each actor.transition is an ActorTransitionView');

    t.same(await seriousAccessibilityViolations(page), [], 'actors: no serious or critical axe violations');
    await screenshot(page, 'admin-actors');
    t.same(problems, [], 'no console errors and no CSP violations');
  });

  t.test('the workers board shows a worker that connects, and the queue depth', async (t) => {
    const { page, problems } = await signedIn(t, browser, ada.token);
    await page.goto(kiln.url + '/admin/workers');
    await page.getByRole('heading', { name: 'Workers', exact: true }).waitFor();
    await page.getByText('Live').first().waitFor();
    const hello = testHello({ software: 'kiln browser test', architectures: ['x86_64-linux', 'aarch64-linux'], systemFeatures: ['kvm'] });
    const worker = await handshake(`ws://127.0.0.1:${kiln.port}/proto`, hello);
    t.teardown(() => worker.close());
    await worker.next('welcome');
    const row = page.getByTestId('workers').locator('tbody tr', { has: page.locator(`code[title="${hello.workerId}"]`) });
    await row.waitFor();
    const text = await row.textContent();
    t.match(text, /kiln browser test/);
    t.match(text, /eval, build, fetch/, 'its capabilities');
    t.match(text, /x86_64-linux, aarch64-linux/, 'its systems');
    t.match(text, /kvm/, 'its features');
    // Nothing in the server reports the queue yet; the board shows what the bus carries when something does.
    t.match(text, /at most 2 builds, 1 evals/, 'its job limits from its hello (2 builds, 1 evaluation), before its first heartbeat');
    kiln.events.events.publish('worker.queue_depth', { queued: 7, by_system: { 'x86_64-linux': 7 } });
    await page.getByTestId('queue-depth').getByText('7').waitFor();
    const jobId = randomUUID();
    kiln.events.events.publish('worker.job_dispatched', { worker: hello.workerId, job_id: jobId, kind: 'build', build_id: jobId });
    const dispatched = page.getByTestId('dispatches').getByRole('listitem').first();
    await dispatched.getByText(jobId.slice(0, 8)).waitFor();
    t.match(await dispatched.textContent(), new RegExp(`build ${jobId.slice(0, 8)} → worker ${hello.workerId.slice(0, 8)}`), 'a dispatched job, with its worker');

    const workers = await kiln.api<unknown[]>('GET', '/workers', { token: ada.token });
    t.same(workers.message.flatMap((w) => issues(ConnectedWorkerView, w)), [], 'GET /workers answers ConnectedWorkerViews');
    t.same(await seriousAccessibilityViolations(page), [], 'workers: no serious or critical axe violations');
    await screenshot(page, 'admin-workers');

    worker.close();
    await row.waitFor({ state: 'detached' });
    t.pass('a worker that leaves leaves the board');
    t.same(problems, [], 'no console errors and no CSP violations');
  });

  t.test('the firehose shows the events its filter matches, and only those', async (t) => {
    const { page, problems } = await signedIn(t, browser, ada.token);
    await page.goto(kiln.url + '/admin/events');
    await page.getByRole('heading', { name: 'Events', exact: true }).waitFor();
    await page.getByLabel(/Filter/).fill('project.*');
    await page.getByRole('button', { name: 'Watch' }).click();
    await page.waitForURL(/\/admin\/events\?events=project\.\*$/);
    await page.getByText('Live: project.*').waitFor();

    t.equal((await kiln.api('PUT', '/caches', { token: ada.token, body: { name: 'firehose-cache' } })).status, 200);
    t.equal((await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } })).status, 200);
    t.equal((await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'web', repository: 'https://example.test/web.git' } })).status, 200);
    const list = page.getByTestId('events');
    await list.getByText('project.create').waitFor();
    t.notMatch(await list.textContent(), /cache\.|organization\./, 'events the filter does not match are not shown');
    await list.getByText('project.create').click();
    t.match(await list.textContent(), /"project": "acme\/web"/, 'an event opens to its content');
    t.same(await seriousAccessibilityViolations(page), [], 'events: no serious or critical axe violations');
    await screenshot(page, 'admin-events');

    await page.getByLabel(/Filter/).fill('Project.*');
    await page.getByRole('button', { name: 'Watch' }).click();
    await page.getByText('kiln refused this filter').waitFor();
    t.pass('a filter kiln refuses says so');
    // The refused upgrade is the one failed request the browser reports.
    t.same(problems.filter((p) => !/WebSocket connection .* failed/.test(p)), [], 'no other console errors and no CSP violations');
  });

  t.test('/admin: instance webhooks, created with the API\'s errors by their field, tested, redelivered, deleted', async (t) => {
    const receiver = await startReceiver(t);
    const { page, problems } = await signedIn(t, browser, ada.token);
    await page.goto(kiln.url + '/admin');
    await page.getByRole('heading', { name: 'Instance webhooks' }).waitFor();
    await page.getByText('No instance webhooks.').waitFor();

    await page.getByLabel('URL').fill('ftp://nowhere.example/hook');
    await page.getByRole('button', { name: 'Add webhook' }).click();
    await page.locator('#hook-url-error').waitFor();
    t.match(await page.locator('#hook-url-error').textContent(), /^url: .*http/, "the API's message under the URL field");
    t.equal(await page.getByLabel('URL').getAttribute('aria-invalid'), 'true');

    await page.getByLabel('URL').fill(receiver.url);
    await page.getByLabel(/Events/).fill('project.*, webhook.ping');
    await page.getByRole('button', { name: 'Add webhook' }).click();
    await page.getByTestId('webhook-secret').waitFor();
    t.match(await page.getByTestId('webhook-secret').getByRole('textbox').inputValue(), /\S{16,}/, 'the signing secret, shown once');
    const hooks = page.getByTestId('webhooks');
    await hooks.getByText(receiver.url, { exact: true }).waitFor();

    await hooks.getByRole('button', { name: 'Send test' }).click();
    await page.getByText(/Test delivery to .*: delivered/).waitFor();
    await hooks.getByRole('button', { name: 'Deliveries' }).click();
    const history = hooks.locator('table');
    await history.getByText('webhook.ping').waitFor();
    await history.getByRole('button', { name: 'Redeliver' }).first().click();
    await page.getByText('Redelivered: delivered').waitFor();
    await hooks.getByText('Page 1 of 1 · 2 in all').waitFor();
    t.equal(receiver.requests.length, 2, 'the receiver got the test and the redelivery');

    const [hook] = (await kiln.api<{ id: string }[]>('GET', '/admin/webhooks', { token: ada.token })).message;
    t.same(issues(WebhookView, hook), [], 'GET /admin/webhooks answers WebhookViews');
    const page1 = await kiln.api('GET', `/admin/webhooks/${hook!.id}/deliveries`, { token: ada.token });
    t.same(issues(DeliveryPage, page1.message), [], 'a delivery history page is a DeliveryPage');
    t.same(await seriousAccessibilityViolations(page), [], 'admin: no serious or critical axe violations');
    await screenshot(page, 'admin-webhooks');

    await hooks.getByRole('button', { name: 'Delete' }).click();
    await hooks.getByRole('button', { name: 'Cancel' }).click();
    t.equal((await kiln.api<unknown[]>('GET', '/admin/webhooks', { token: ada.token })).message.length, 1, 'Cancel keeps it');
    await hooks.getByRole('button', { name: 'Delete' }).click();
    await page.getByRole('dialog', { name: 'Delete' }).getByRole('button', { name: 'Delete' }).click();
    await page.getByText('No instance webhooks.').waitFor();
    t.equal((await kiln.api<unknown[]>('GET', '/admin/webhooks', { token: ada.token })).message.length, 0, 'confirmed: deleted');
    t.same(problems.filter((p) => !/status of 400/.test(p)), [], 'no console errors beyond the refused request');
  });

  t.test('users and sessions: every account with its active sessions, search, and the sessions of one account', async (t) => {
    await signUp(kiln, 'ben');
    const benAgain = await login(kiln, 'ben', 'pw-ben-secret');
    t.equal((await kiln.api('POST', '/auth/logout', { token: benAgain })).status, 200);
    const { page, problems } = await signedIn(t, browser, ada.token);
    await page.goto(kiln.url + '/admin');
    await page.getByRole('navigation', { name: 'admin' }).getByRole('link', { name: 'Users' }).click();
    const users = page.getByTestId('users');
    await users.getByText('ben', { exact: true }).waitFor();
    t.ok(await users.getByRole('row').filter({ hasText: 'ada' }).getByText('superuser').isVisible(), 'the superuser is marked');
    t.same(await seriousAccessibilityViolations(page), [], 'users: no serious or critical axe violations');
    await screenshot(page, 'admin-users');

    await page.getByLabel('Username, name or e-mail').fill('BEN@example');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByText('Page 1 of 1 · 1 in all').waitFor();
    t.same(await users.locator('tbody strong').allTextContents(), ['ben'], 'the search runs on the server');

    await page.getByRole('link', { name: '1 active sessions of ben' }).click();
    await page.getByRole('heading', { name: 'Sessions of ben' }).waitFor();
    const sessions = page.getByTestId('sessions');
    await page.getByText('Page 1 of 1 · 1 in all').waitFor();
    t.equal(await sessions.getByText('no', { exact: true }).count(), 1, 'one active session, not revoked');
    await page.getByLabel(/all, revoked/).check();
    await page.getByText('Page 1 of 1 · 2 in all').waitFor();
    t.equal(await sessions.getByRole('row').filter({ hasText: 'ben' }).count(), 2, 'the logged-out session too');

    await page.getByLabel('Username').fill('');
    await page.getByRole('button', { name: 'Show' }).click();
    await page.getByRole('heading', { name: "Every account's sessions" }).waitFor();
    await sessions.getByRole('row').filter({ hasText: 'ada' }).getByText('this session').first().waitFor();
    t.same(await seriousAccessibilityViolations(page), [], 'sessions: no serious or critical axe violations');
    await screenshot(page, 'admin-sessions');

    await page.getByLabel('Username').fill('nobody');
    await page.getByRole('button', { name: 'Show' }).click();
    await page.getByText('no user "nobody"').waitFor();
    t.same(problems.filter((p) => !/status of 404/.test(p)), [], 'no console errors beyond the refused request');
  });

  t.test('OIDC sign-in lands on /auth/callback#token= and ends on Home; that account gets the 403 page', async (t) => {
    const { page, problems } = await openPage(t, browser);
    const visited: string[] = [];
    const requested: string[] = [];
    page.on('request', (request) => {
      if (request.isNavigationRequest()) requested.push(request.url());
    });
    page.on('framenavigated', (frame) => {
      if (frame === page.mainFrame()) visited.push(frame.url());
    });
    provider.signInAs('sub-olga');
    await page.goto(kiln.url + '/login');
    await page.getByRole('link', { name: 'Sign in with single sign-on' }).click();
    await page.getByRole('heading', { name: 'Home' }).waitFor();
    t.ok(requested.some((u) => u.startsWith(`${provider.issuer}/auth`)), 'the browser went through the provider');
    t.ok(visited.some((u) => u.startsWith(`${kiln.url}/auth/callback#token=`)), 'and landed on /auth/callback with #token=');
    t.equal(page.url(), `${kiln.url}/`, 'Home, with no token left in the address');
    const token = await page.evaluate(() => sessionStorage.getItem('kiln.session'));
    const me = await kiln.api<{ username: string; superuser: boolean }>('GET', '/user', { token: token ?? '' });
    t.match(me.message, { username: 'olga', superuser: false }, 'signed in as the OIDC account');
    t.equal(await page.getByRole('navigation', { name: 'main' }).getByRole('link', { name: 'Admin' }).count(), 0, 'no Admin link for her');

    for (const path of ['/admin', '/admin/users', '/admin/sessions', '/admin/actors', '/admin/workers', '/admin/events']) {
      await page.goto(kiln.url + path);
      await page.getByRole('heading', { name: '403 — not for you' }).waitFor();
    }
    t.equal(await page.getByTestId('events').count(), 0, 'no firehose for her');
    t.same(await seriousAccessibilityViolations(page), [], '403: no serious or critical axe violations');
    await screenshot(page, 'admin-forbidden');
    t.same(problems, [], 'no console errors and no CSP violations');
  });

  t.test("a failed single sign-on says why in kiln's words, never with the link's text", async (t) => {
    const { page, problems } = await openPage(t, browser);
    // A callback with no sign-in attempt behind it: the server's own refusal, handed over in the fragment.
    await page.goto(`${kiln.url}/api/v1/auth/oidc/callback?state=no-such-attempt&code=x`);
    await page.waitForURL(`${kiln.url}/auth/callback`);
    const alert = page.getByRole('alert');
    await alert.waitFor();
    t.equal(await alert.textContent(), 'Sign-in failed: the identity provider refused, or the sign-in attempt expired. Start again.');
    t.equal(new URL(page.url()).hash, '', 'the fragment is gone from the address');
    t.same(await seriousAccessibilityViolations(page), [], 'callback failure: no serious or critical axe violations');
    await screenshot(page, 'oidc-callback-failed');

    await page.goto('about:blank');
    await page.goto(`${kiln.url}/auth/callback#error=${encodeURIComponent('Call +1 555 0100')}&message=${encodeURIComponent('Your account is locked: call +1 555 0100')}`);
    await alert.waitFor();
    t.equal(await alert.textContent(), 'Sign-in failed: the sign-in did not return a session.', 'a forged link shows none of its words');
    t.same(problems, [], 'no console errors and no CSP violations');
  });
});
