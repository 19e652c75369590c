// The cache pages, My Invites and Settings in real Chromium against a real kiln serve, with real Nix
// substituting from a cache configured with exactly the lines the page shows.
import { spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import t, { type Test } from 'tap';
import type { z } from 'zod';
import { UserSettingsView } from '../../protocol/api/accounts.js';
import { ApiKeyView, CreatedApiKeyView } from '../../protocol/api/apiKeys.js';
import { CacheStatsView, NarPageView, UpstreamView } from '../../protocol/api/caches.js';
import { InvitationView } from '../../protocol/api/invitations.js';
import { MemberView } from '../../protocol/api/organizations.js';
import { SubscriberView, SubscriptionRequestView } from '../../protocol/api/subscriptions.js';
import { WebhookView } from '../../protocol/api/webhooks.js';
import { signUp, type TestAccount } from '../support/accounts.js';
import { launchBrowser, openPage, screenshot, seriousAccessibilityViolations } from '../support/browser.js';
import { startTestKiln, type TestKiln } from '../support/kiln.js';
import { eventually } from '../support/eventually.js';
import { freshStore } from '../support/nixClient.js';
import { buildFixturePaths, nixEnv, tempDir } from '../support/nixStore.js';
import { uploadStorePath } from '../support/restUpload.js';

/** Signs `who` in through the sign-in page and waits for Home. */
async function signIn(page: Page, kiln: TestKiln, who: TestAccount): Promise<void> {
  await page.goto(kiln.url + '/login');
  await page.getByLabel('Username or e-mail').fill(who.username);
  await page.getByLabel('Password').fill(who.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Home' }).waitFor();
}

interface Session { page: Page; problems: string[] }

/** One signed-in page per person for the whole file (signing in is the slow part); each subtest starts with no problems. */
async function signedInPage(t: Test, browser: Browser, kiln: TestKiln, who: TestAccount): Promise<Session> {
  const { page, problems } = await openPage(t, browser);
  await signIn(page, kiln, who);
  return { page, problems };
}

const fresh = (session: Session): Session => {
  session.problems.length = 0;
  return session;
};

/** Parses a real API answer with the view schema the pages' types come from: a drift fails here. */
async function parsed<S extends z.ZodType>(t: Test, kiln: TestKiln, token: string, path: string, schema: S): Promise<z.infer<S>> {
  const res = await kiln.api('GET', path, { token });
  t.equal(res.status, 200, `GET ${path}`);
  return schema.parse(res.message);
}

async function checkPage(t: Test, page: Page, name: string): Promise<void> {
  t.same(await seriousAccessibilityViolations(page), [], `${name}: no serious or critical axe violations`);
  // Clicks scroll the page; the reviewer's screenshot starts at the top.
  await page.evaluate('window.scrollTo(0, 0)');
  await screenshot(page, name);
}

t.test('cache pages, invitations and settings', async (t) => {
  const kiln = await startTestKiln(t);
  const browser = await launchBrowser(t);
  // The first account is the instance's superuser; the people in this test are ordinary users.
  await signUp(kiln, 'root');
  const ada = await signUp(kiln, 'ada');
  const bea = await signUp(kiln, 'bea');
  const fixtures = buildFixturePaths();
  const adaSession = await signedInPage(t, browser, kiln, ada);
  const beaSession = await signedInPage(t, browser, kiln, bea);

  t.test('create a cache from Home, copy its nix.conf lines, and substitute a path with real Nix', async (t) => {
    const { page, problems } = fresh(adaSession);
    await page.goto(kiln.url + '/');
    await page.getByText('New cache').click();
    await page.getByLabel('Cache name').fill('Bad Name!');
    await page.getByRole('button', { name: 'Create cache' }).click();
    const nameError = page.locator('#cache-name-error');
    await nameError.waitFor();
    t.match(await nameError.textContent(), /^name: /, "the API's refusal stands under the name field");

    await page.getByLabel('Cache name').fill('pub');
    await page.getByLabel('Description').fill('public things');
    await page.getByLabel('Public').check();
    await page.getByRole('button', { name: 'Create cache' }).click();
    await page.waitForURL(/\/caches\/pub$/);
    await page.getByRole('heading', { name: 'pub', exact: true }).waitFor();
    const lines = (await page.getByTestId('nix-conf').textContent()) ?? '';
    const key = (await page.getByTestId('public-key').textContent()) ?? '';
    t.match(lines, new RegExp(`^extra-substituters = ${kiln.url}/cache/pub\nextra-trusted-public-keys = ${key.replace(/[+/]/g, '\\$&')}\n$`));
    t.equal(await page.getByTestId('netrc').count(), 0, 'a public cache needs no netrc line');
    await checkPage(t, page, 'cache-overview');

    const uploads = [fixtures.file, fixtures.empty];
    for (const path of uploads) t.equal((await uploadStorePath(kiln.url, ada.token, 'pub', path)).status, 200, `uploaded ${path}`);
    await page.reload();
    await page.getByTestId('stats').getByText('Paths').waitFor();
    t.match(await page.getByTestId('stats').textContent(), /Paths2/, 'the statistics count the uploads');
    t.equal((await parsed(t, kiln, ada.token, '/caches/pub/stats', CacheStatsView)).paths, 2);

    // Nix reads the copied lines as a user configuration file; the system one only keeps it offline.
    const confDir = tempDir('kiln-nixconf-');
    writeFileSync(join(confDir, 'nix.conf'), 'sandbox = false\nbuild-users-group =\nsubstituters =\nnarinfo-cache-negative-ttl = 0\nnarinfo-cache-positive-ttl = 0\n');
    const userConf = join(confDir, 'copied.conf');
    writeFileSync(userConf, lines);
    const store = freshStore();
    const env = { ...nixEnv(), NIX_CONF_DIR: confDir, NIX_USER_CONF_FILES: userConf };
    const realised = await runNixPlain(['-r', '--store', store, fixtures.file], env);
    t.equal(realised.status, 0, `nix-store -r substitutes from the cache:\n${realised.stderr}`);
    t.ok(existsSync(join(store, fixtures.file)), 'the path is in the fresh store');
    t.same(problems.filter((p) => !/status of 400/.test(p)), [], 'no console errors but the refused name');
  });

  t.test('the Paths tab lists, filters, shows and deletes (confirmed) cached paths', async (t) => {
    const { page, problems } = fresh(adaSession);
    await page.goto(kiln.url + '/caches/pub/nars');
    const table = page.getByTestId('nars');
    await table.waitFor();
    t.equal(await table.locator('tbody tr').count(), 2);
    t.equal((await parsed(t, kiln, ada.token, '/caches/pub/nars', NarPageView)).total, 2);

    // Sort and order run on the server: the rows come in the API's order for each choice. The first
    // choice's answer (by size, descending) is held back until the second one's has come: the page
    // shows the answer to the latest choice, not the one that came last.
    const pathsIn = async () => table.locator('tbody tr code').allTextContents();
    const heldBack = (url: string) => url.includes('sort=nar_size&order=desc');
    let releaseHeld = () => {};
    const held = new Promise<void>((resolve) => (releaseHeld = resolve));
    const heldRequests = (url: URL) => heldBack(url.href);
    await page.route(heldRequests, async (route) => {
      await held;
      await route.continue();
    });
    const staleAnswer = page.waitForResponse((response) => heldBack(response.url()));
    for (const order of ['asc', 'desc'] as const) {
      const api = (await parsed(t, kiln, ada.token, `/caches/pub/nars?sort=nar_size&order=${order}`, NarPageView)).items.map((n) => n.store_path);
      if (order === 'asc') {
        await page.getByLabel('Sort by').selectOption('nar_size');
        await page.getByLabel('Order').selectOption(order);
        await eventually(pathsIn, { until: (paths) => paths.join() === api.join(), message: 'the rows by size, ascending' });
        releaseHeld();
        await staleAnswer;
        await page.unroute(heldRequests);
      } else {
        await page.getByLabel('Order').selectOption(order);
      }
      // An answer shown late would show up here: give the page a chance to draw it.
      await page.evaluate(() => new Promise((resolve) => setTimeout(resolve, 50)));
      await eventually(pathsIn, { until: (paths) => paths.join() === api.join(), message: `the rows by size, ${order}` });
      t.same(await pathsIn(), api, `by size, ${order}`);
    }
    const bySize = await pathsIn();
    t.same(bySize, [...(await parsed(t, kiln, ada.token, '/caches/pub/nars?sort=nar_size&order=asc', NarPageView)).items.map((n) => n.store_path)].reverse(), 'descending is ascending reversed');

    const fileHash = basename(fixtures.file).slice(0, 32);
    await page.getByLabel('Hash prefix').fill(fileHash.slice(0, 8));
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.getByText('Page 1 of 1 · 1 in all').waitFor();
    t.same(await pathsIn(), [fixtures.file], 'the hash prefix picks its path');
    await page.getByLabel('Hash prefix').fill('');
    await page.getByLabel('Package').fill('fixture-empty');
    await page.getByRole('button', { name: 'Filter' }).click();
    // The hash filter's answer also said "1 in all": wait for the package's row itself.
    await table.locator('tbody tr code').getByText(/kiln-fixture-empty$/).waitFor();
    await page.getByText('Page 1 of 1 · 1 in all').waitFor();
    t.same((await pathsIn()).map((p) => p.replace(/^.*?-/, '')), ['kiln-fixture-empty']);

    await page.getByRole('button', { name: 'Show kiln-fixture-empty' }).click();
    await page.getByTestId('nar-detail').getByText('NAR hash').waitFor();
    t.match(await page.getByTestId('nar-detail').textContent(), /Held by1 cache/);
    await checkPage(t, page, 'cache-paths');

    await page.getByRole('button', { name: 'Delete' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.waitFor();
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    t.equal((await parsed(t, kiln, ada.token, '/caches/pub/nars', NarPageView)).total, 2, 'cancel deletes nothing');
    await page.getByRole('button', { name: 'Delete' }).click();
    await dialog.getByRole('button', { name: 'Delete' }).click();
    await page.getByText(/^Deleted .*kiln-fixture-empty from pub/).waitFor();
    t.equal((await parsed(t, kiln, ada.token, '/caches/pub/nars', NarPageView)).total, 1, 'the API no longer has it');
    t.same(problems, []);
  });

  t.test('upstreams: an invalid key is refused next to its field; a valid one is listed, then removed', async (t) => {
    const { page, problems } = fresh(adaSession);
    await page.goto(kiln.url + '/caches/pub/upstreams');
    await page.getByLabel('URL').fill('https://upstream.example.test');
    await page.getByLabel('Public key').fill('not-a-key');
    await page.getByRole('button', { name: 'Add upstream' }).click();
    await page.locator('#public_key-error').waitFor();
    t.match(await page.locator('#public_key-error').textContent(), /public_key/);
    const upstreamKey = 'up-1:3REoSjvMtmBzmoRZVZPZuB/MG/vyNbytXCID+0ocOAA=';
    await page.getByLabel('Public key').fill(upstreamKey);
    await page.getByRole('button', { name: 'Add upstream' }).click();
    await page.getByTestId('upstreams').getByText(upstreamKey).waitFor();
    t.equal((await parsed(t, kiln, ada.token, '/caches/pub/upstreams', UpstreamView.array())).length, 1);
    await checkPage(t, page, 'cache-upstreams');
    await page.getByRole('button', { name: 'Remove' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Remove' }).click();
    await page.getByText('No upstreams.').waitFor();
    t.same(problems.filter((p) => !/status of 400/.test(p)), []);
  });

  t.test('webhooks: created with its secret shown once, then deleted (confirmed)', async (t) => {
    const { page, problems } = fresh(adaSession);
    await page.goto(kiln.url + '/caches/pub/webhooks');
    await page.getByLabel('URL').fill('http://127.0.0.1:9/hook');
    await page.getByLabel(/^Events/).fill('cache.*');
    await page.getByRole('button', { name: 'Add webhook' }).click();
    const secret = await page.getByRole('textbox', { name: 'Webhook signing secret' }).inputValue();
    t.ok(secret.length >= 16, 'the signing secret is shown');
    const hooks = await parsed(t, kiln, ada.token, '/caches/pub/webhooks', WebhookView.array());
    t.match(hooks, [{ url: 'http://127.0.0.1:9/hook', events: ['cache.*'], scope: 'cache' }]);
    t.notOk(JSON.stringify(hooks).includes(secret), 'the list never carries the secret');
    await page.getByTestId('webhooks').getByRole('cell', { name: 'cache.*' }).waitFor();
    await checkPage(t, page, 'cache-webhooks');
    await page.getByRole('button', { name: 'Delete' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete' }).click();
    await page.getByText('No webhooks.').waitFor();
    t.same(problems, []);
  });

  t.test('a private cache: its netrc line; another user gets the not-found page', async (t) => {
    t.equal((await kiln.api('PUT', '/caches', { token: ada.token, body: { name: 'priv' } })).status, 200);
    const { page } = fresh(adaSession);
    await page.goto(kiln.url + '/caches/priv');
    await page.getByTestId('netrc').waitFor();
    t.equal(await page.getByTestId('netrc').textContent(), 'machine 127.0.0.1 login kiln password <API key with viewCache>\n');
    t.match(await page.getByTestId('nix-conf').textContent(), /\nnetrc-file = \/etc\/nix\/netrc\n$/);

    const other = fresh(beaSession);
    await other.page.goto(kiln.url + '/caches/priv');
    await other.page.getByRole('heading', { name: 'Cache not found' }).waitFor();
    t.equal(await other.page.getByTestId('nix-conf').count(), 0, 'nothing of the cache is shown');
    await checkPage(t, other.page, 'cache-not-found');
    t.same(other.problems.filter((p) => !/status of 404/.test(p)), []);
  });

  t.test('invitations: ada invites bea to two caches; bea accepts one and declines the other', async (t) => {
    t.equal((await kiln.api('PUT', '/caches', { token: ada.token, body: { name: 'other' } })).status, 200);
    const owner = fresh(adaSession);
    for (const [cache, role] of [['priv', 'Write'], ['other', 'View']] as const) {
      await owner.page.goto(`${kiln.url}/caches/${cache}/members`);
      await owner.page.getByLabel('Username').fill(role === 'Write' ? 'nobody-here' : 'bea');
      if (role === 'Write') {
        await owner.page.getByRole('button', { name: 'Send invitation' }).click();
        await owner.page.getByRole('alert').first().waitFor();
        t.match(await owner.page.getByRole('alert').first().textContent(), /nobody-here|user/i, 'an unknown user is refused');
        await owner.page.getByLabel('Username').fill('bea');
      }
      await owner.page.getByLabel('Role', { exact: true }).selectOption(role);
      await owner.page.getByRole('button', { name: 'Send invitation' }).click();
      await owner.page.getByTestId('invitations').getByRole('cell', { name: 'bea', exact: true }).waitFor();
    }
    t.equal((await parsed(t, kiln, ada.token, '/caches/priv/invitations', InvitationView.array()))[0]?.role, 'Write');
    await checkPage(t, owner.page, 'cache-members');
    // The owner's pending list: the invitations her caches sent, on My Invites.
    await owner.page.getByRole('navigation', { name: 'main' }).getByRole('link', { name: 'Invites' }).click();
    await owner.page.getByTestId('pending-priv').getByText('bea').waitFor();
    t.match(await owner.page.getByTestId('pending-priv').textContent(), /Invitation of bea as Write/, 'priv: bea invited as Write');
    t.match(await owner.page.getByTestId('pending-other').textContent(), /Invitation of bea as View/, 'other: bea invited as View');

    const invited = fresh(beaSession);
    await invited.page.goto(kiln.url + '/');
    await invited.page.getByRole('link', { name: 'Invites' }).click();
    const mine = invited.page.getByTestId('my-invitations');
    await mine.getByRole('button', { name: 'Accept cache priv' }).waitFor();
    t.match(await mine.textContent(), /cache other/);
    t.equal((await parsed(t, kiln, bea.token, '/user/invitations', InvitationView.array())).length, 2);
    await checkPage(t, invited.page, 'invites');
    await invited.page.getByRole('button', { name: 'Accept cache priv' }).click();
    await invited.page.getByText('Invitation accepted: you are Write on the cache').waitFor();
    await invited.page.getByRole('button', { name: 'Decline cache other' }).click();
    await invited.page.getByText('Invitation declined').waitFor();
    await invited.page.getByText('No open invitations.').waitFor();

    await invited.page.goto(kiln.url + '/caches/priv');
    await invited.page.getByTestId('nix-conf').waitFor();
    t.pass('bea now sees the private cache');
    const members = await parsed(t, kiln, ada.token, '/caches/priv/users', MemberView.array());
    t.same(members.map((m) => [m.user, m.role]), [['bea', 'Write']]);
    t.equal((await kiln.api('GET', '/caches/other', { token: bea.token })).status, 404, 'the declined cache stays hidden');
    t.same(invited.problems, []);
  });

  t.test('the Subscriptions page: a pending request from another organization, approved', async (t) => {
    t.equal((await kiln.api('PUT', '/orgs', { token: bea.token, body: { name: 'beaorg' } })).status, 200);
    const asked = await kiln.api('POST', '/orgs/beaorg/subscribe/pub', { token: bea.token, body: { mode: 1 } });
    t.same([asked.status, asked.message], [200, 'Subscription requested']);
    t.equal((await parsed(t, kiln, ada.token, '/caches/pub/subscription-requests', SubscriptionRequestView.array())).length, 1);

    const { page, problems } = fresh(adaSession);
    await page.goto(kiln.url + '/invites');
    await page.getByTestId('pending-pub').getByText('beaorg').waitFor();
    await page.getByTestId('pending-pub').getByRole('link', { name: 'review' }).click();
    await page.getByTestId('subscription-requests').getByRole('cell', { name: 'beaorg (whole organization)' }).waitFor();
    t.match(await page.getByTestId('subscription-requests').textContent(), /read-only/);
    await checkPage(t, page, 'cache-subscriptions');
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.getByText('beaorg now subscribes to pub.').waitFor();
    await page.getByTestId('subscribers').getByText('beaorg (whole organization)').waitFor();
    t.match(await parsed(t, kiln, ada.token, '/caches/pub/subscriptions', SubscriberView.array()), [{ organization: 'beaorg', project: null, mode: 1 }]);

    t.equal((await kiln.api('PUT', '/orgs', { token: bea.token, body: { name: 'beaorg2' } })).status, 200);
    t.equal((await kiln.api('POST', '/orgs/beaorg2/subscribe/pub', { token: bea.token, body: { mode: 1 } })).status, 200);
    await page.reload();
    const requests = page.getByTestId('subscription-requests');
    await requests.getByRole('cell', { name: 'beaorg2 (whole organization)' }).waitFor();
    await page.getByRole('button', { name: 'Deny' }).click();
    await page.getByRole('dialog').getByText('Deny the request of beaorg2?').waitFor();
    await page.getByRole('dialog').getByRole('button', { name: 'Deny' }).click();
    await requests.getByRole('cell', { name: 'beaorg2 (whole organization)' }).waitFor({ state: 'detached' });
    t.same(await parsed(t, kiln, ada.token, '/caches/pub/subscription-requests', SubscriptionRequestView.array()), [], 'denied: no request left');
    t.same((await parsed(t, kiln, ada.token, '/caches/pub/subscriptions', SubscriberView.array())).map((s) => s.organization), ['beaorg'], 'and no new subscriber');
    t.same(problems, []);
  });

  t.test('Settings: the profile saved, a wrong password named under its field; an API key created, its secret shown once and gone after reload; it works; deleted', async (t) => {
    const { page, problems } = fresh(beaSession);
    await page.goto(kiln.url + '/');
    await page.getByRole('link', { name: 'Settings' }).click();
    await page.getByTestId('username').waitFor();
    await page.getByLabel('Display name').fill('Bea B.');
    await page.getByRole('button', { name: 'Save profile' }).click();
    await page.getByText('Saved.', { exact: true }).waitFor();
    t.equal((await parsed(t, kiln, bea.token, '/user/settings', UserSettingsView)).name, 'Bea B.', 'the profile is saved');
    await page.getByLabel(/^Current password/).fill('not-her-password');
    await page.getByLabel('New password').fill('another-long-password');
    await page.getByRole('button', { name: 'Save profile' }).click();
    await page.locator('#current_password-error').waitFor();
    t.match(await page.locator('#current_password-error').textContent(), /^current_password: wrong password/, 'under the current password field');
    await page.getByLabel('Name', { exact: true }).fill('nix-read');
    await page.getByLabel('viewProject', { exact: true }).uncheck();
    await page.getByLabel('Expires after (days; empty: never)').fill('7');
    await page.getByLabel('Pinned to').selectOption('cache');
    await page.getByLabel('Cache', { exact: true }).fill('priv');
    await page.getByLabel('Allowed source addresses (CIDR blocks, separated by commas; empty: any)').fill('not-an-ip');
    await page.getByRole('button', { name: 'Create API key' }).click();
    await page.locator('#allowed_ips-error').waitFor();
    t.match(await page.locator('#allowed_ips-error').textContent(), /not-an-ip/, 'the bad CIDR is named under its field');
    await page.getByLabel('Allowed source addresses (CIDR blocks, separated by commas; empty: any)').fill('127.0.0.0/8');
    await page.getByRole('button', { name: 'Create API key' }).click();
    const secret = await page.getByRole('textbox', { name: 'New API key' }).inputValue();
    t.match(secret, /^SVC/, 'the secret is shown');
    await checkPage(t, page, 'settings');
    const listed = await parsed(t, kiln, bea.token, '/user/keys', ApiKeyView.array());
    t.match(listed, [{ name: 'nix-read', cache: 'priv', allowed_ips: ['127.0.0.0/8'] }]);
    t.same(listed[0]?.permissions, ['viewCache'], 'only the permission left checked');
    const expiresIn = new Date(listed[0]!.expires_at!).getTime() - Date.now();
    t.ok(expiresIn > 6.9 * 86_400_000 && expiresIn <= 7 * 86_400_000, 'expires in the 7 days asked for');
    t.match(await page.getByTestId('api-keys').getByRole('row').filter({ hasText: 'nix-read' }).textContent(), /viewCache.*cache priv.*from 127\.0\.0\.0\/8/s, 'the list shows permissions, pin and addresses');
    t.notOk(JSON.stringify(listed).includes(secret), 'the list never carries the secret');
    t.equal((await kiln.api('GET', '/caches/priv', { token: secret })).status, 200, 'the key reads its cache');

    await page.reload();
    await page.getByTestId('api-keys').getByRole('cell', { name: 'nix-read', exact: true }).waitFor();
    t.equal(await page.getByTestId('new-key').count(), 0, 'after a reload the secret is gone');
    t.notOk((await page.content()).includes(secret), 'and appears nowhere on the page');

    await page.getByRole('button', { name: 'Delete' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete' }).click();
    await page.getByText('No API keys.').waitFor();
    t.equal((await kiln.api('GET', '/caches/priv', { token: secret })).status, 401, 'the deleted key is refused');
    t.same(problems.filter((p) => !/status of 40[03]/.test(p)), []);
  });

  t.test('the created key view parses', async (t) => {
    const res = await kiln.api('POST', '/user/keys', { token: ada.token, body: { name: 'schema', permissions: ['viewCache'] } });
    t.ok(CreatedApiKeyView.safeParse(res.message).success, JSON.stringify(res.message));
  });
});

/**
 * nix-store configured only by its environment's files: runNix passes `--option substituters ''`,
 * which would override the copied lines. Asynchronous, since the server answering Nix is in this process.
 */
function runNixPlain(args: string[], env: NodeJS.ProcessEnv): Promise<{ status: number; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('nix-store', args, { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ status: code ?? -1, stderr }));
  });
}
