// The organization and project pages in real Chromium against a real kiln serve: create an
// organization and a project from Home, members, SSH key, build servers, subscriptions, settings,
// tasks, webhooks with a loopback receiver, worker tokens, invitations, Evaluate; another user's 404s.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { z } from 'zod';
import { InvitationView } from '../../protocol/api/invitations.js';
import { MemberView, OrganizationView, SshKeyView } from '../../protocol/api/organizations.js';
import { ProjectEvaluationsPage } from '../../protocol/api/projectEvaluations.js';
import { ProjectDetails, ProjectView } from '../../protocol/api/projects.js';
import { ServerView } from '../../protocol/api/servers.js';
import { SubscriptionsView } from '../../protocol/api/subscriptions.js';
import { DeliveryPage, TaskActionView, WebhookView } from '../../protocol/api/webhooks.js';
import { WorkerRegistrationView } from '../../protocol/api/workerRegistrations.js';
import { signUp, type TestAccount } from '../support/accounts.js';
import { launchBrowser, openPage, screenshot, seriousAccessibilityViolations } from '../support/browser.js';
import { startReceiver } from '../support/events.js';
import { eventually } from '../support/eventually.js';
import { createFlakeRepo, testFlake } from '../support/flakeRepo.js';
import { freePort, startTestKiln, type TestKiln } from '../support/kiln.js';
import type { Page } from 'playwright-core';

async function signIn(page: Page, kiln: TestKiln, account: TestAccount, path = '/'): Promise<void> {
  await page.goto(`${kiln.url}/login?next=${encodeURIComponent(path)}`);
  await page.getByLabel('Username or e-mail').fill(account.username);
  await page.getByLabel('Password').fill(account.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

/** Answers `GET path` as ada and checks it against the view's zod schema: the page and the API agree on the shape. */
async function parsed<S extends z.ZodType>(kiln: TestKiln, token: string, path: string, schema: S): Promise<z.infer<S>> {
  const res = await kiln.api('GET', path, { token });
  if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${JSON.stringify(res.message)}`);
  return schema.parse(res.message);
}

t.test('organization and project pages', async (t) => {
  const kiln = await startTestKiln(t);
  const browser = await launchBrowser(t);
  const receiver = await startReceiver(t);
  // The first account is the instance's superuser, whose invitations add members at once: ada is an ordinary user.
  await signUp(kiln, 'root');
  const ada = await signUp(kiln, 'ada');
  const bea = await signUp(kiln, 'bea');
  const repoDir = await mkdtemp(join(tmpdir(), 'kiln-fe-proj-'));
  t.teardown(() => rm(repoDir, { recursive: true, force: true }));
  const repo = createFlakeRepo(join(repoDir, 'flake'), { 'flake.nix': testFlake(`fe-proj-${Date.now()}`) });
  t.equal((await kiln.api('PUT', '/caches', { token: ada.token, body: { name: 'main' } })).status, 200, 'a cache to subscribe to');

  const { page, context, problems } = await openPage(t, browser);
  // A missing element fails in 10 s rather than Playwright's 30 s: the file stays within its budget.
  page.setDefaultTimeout(10_000);
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: kiln.url });
  await signIn(page, kiln, ada);
  await page.getByRole('heading', { name: 'Home' }).waitFor();

  await t.test('Home → New organization: the API refuses a bad name under the field, then the organization page', async (t) => {
    await page.getByRole('link', { name: 'New organization' }).click();
    await page.getByRole('heading', { name: 'New organization' }).waitFor();
    t.same(await seriousAccessibilityViolations(page), [], 'new organization: no serious or critical axe violations');
    await page.getByLabel('Name', { exact: true }).fill('-bad');
    await page.getByRole('button', { name: 'Create organization' }).click();
    await page.locator('#name-error').waitFor();
    t.match(await page.locator('#name-error').textContent(), /^name: must be/, "the API's message under the name field");
    await page.getByLabel('Name', { exact: true }).fill('acme');
    await page.getByLabel('Display name (optional)').fill('Acme Inc');
    await page.getByRole('button', { name: 'Create organization' }).click();
    await page.waitForURL(/\/orgs\/acme$/);
    await page.getByRole('heading', { name: /Acme Inc/ }).waitFor();
    await parsed(kiln, ada.token, '/orgs/acme', OrganizationView);
  });

  await t.test('members: add, change the role, remove with confirmation', async (t) => {
    const members = page.getByTestId('members');
    await page.getByLabel('Username', { exact: true }).fill('nobody-here');
    await page.getByRole('button', { name: 'Add member' }).click();
    await page.getByRole('alert').filter({ hasText: /nobody-here/ }).waitFor();
    await page.getByLabel('Username', { exact: true }).fill('bea');
    await page.getByRole('button', { name: 'Add member' }).click();
    await members.getByRole('cell', { name: 'bea', exact: true }).waitFor();
    await page.getByLabel('Role of bea').selectOption('Write');
    await eventually(async () => (await parsed(kiln, ada.token, '/orgs/acme/users', z.array(MemberView))).find((m) => m.user === 'bea')?.role === 'Write',
      { message: "bea's role is Write on the server" });
    t.pass('the role changed on the server');
    await page.getByRole('button', { name: 'Remove bea' }).click();
    await page.getByRole('dialog').getByText(/Remove bea from acme/).waitFor();
    await page.getByRole('dialog').getByRole('button', { name: 'Remove', exact: true }).click();
    await members.getByRole('cell', { name: 'bea', exact: true }).waitFor({ state: 'detached' });
    const after = await parsed(kiln, ada.token, '/orgs/acme/users', z.array(MemberView));
    t.same(after.map((m) => m.user), ['ada'], 'bea is gone');
  });

  await t.test('SSH key: shown, copied, regenerated after confirming', async (t) => {
    const key = page.getByTestId('ssh-key').getByRole('textbox');
    const before = await key.inputValue();
    t.match(before, /^ssh-ed25519 /);
    t.equal(before, (await parsed(kiln, ada.token, '/orgs/acme/ssh', SshKeyView)).public_key);
    await page.getByRole('button', { name: 'Copy SSH public key' }).click();
    await page.getByRole('button', { name: 'Copied SSH public key' }).waitFor();
    t.equal(await page.evaluate('navigator.clipboard.readText()'), before, 'on the clipboard');
    await page.getByRole('button', { name: 'Regenerate key' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Regenerate' }).click();
    await page.getByRole('dialog').waitFor({ state: 'hidden' });
    const after = await key.inputValue();
    t.not(after, before, 'a new key');
    t.equal(after, (await parsed(kiln, ada.token, '/orgs/acme/ssh', SshKeyView)).public_key);
  });

  await t.test('build servers: add, check the connection (nothing listens), deactivate', async (t) => {
    const port = await freePort();
    await page.getByLabel('Name', { exact: true }).fill('builder');
    await page.getByLabel('Host').fill('127.0.0.1');
    await page.getByLabel('Port').fill(String(port));
    await page.getByRole('button', { name: 'Add server' }).click();
    await page.getByTestId('servers').getByRole('cell', { name: 'builder', exact: true }).waitFor();
    await page.getByRole('button', { name: 'Check connection' }).click();
    await page.getByTestId('check-builder').getByText(/Could not connect/).waitFor();
    await page.getByRole('button', { name: 'Deactivate builder' }).click();
    await page.getByRole('button', { name: 'Activate builder', exact: true }).waitFor();
    const [server] = await parsed(kiln, ada.token, '/servers/acme', z.array(ServerView));
    t.match(server, { name: 'builder', port, active: false });
    await page.getByRole('button', { name: 'Activate builder', exact: true }).click();
    await page.getByRole('button', { name: 'Deactivate builder' }).waitFor();
    const [activated] = await parsed(kiln, ada.token, '/servers/acme', z.array(ServerView));
    t.match(activated, { name: 'builder', active: true }, 'active again on the server');
  });

  await t.test('cache subscriptions of the organization', async (t) => {
    await page.getByLabel('Cache name').fill('main');
    await page.getByRole('button', { name: 'Subscribe', exact: true }).click();
    await page.getByTestId('org-subscriptions').getByRole('link', { name: 'main' }).waitFor();
    const subs = await parsed(kiln, ada.token, '/orgs/acme/subscribe', SubscriptionsView);
    t.same(subs.subscriptions.map((s) => s.cache), ['main']);
    t.same(await seriousAccessibilityViolations(page), [], 'organization page: no serious or critical axe violations');
    await page.evaluate('window.scrollTo(0, 0)');
    await screenshot(page, 'organization');
  });

  await t.test('New project from the organization: a bad repository under its field, then the project page', async (t) => {
    await page.getByRole('link', { name: 'New project' }).click();
    await page.getByRole('heading', { name: 'New project' }).waitFor();
    t.equal(await page.getByLabel('Organization').inputValue(), 'acme', 'the organization is chosen');
    t.same(await seriousAccessibilityViolations(page), [], 'new project: no serious or critical axe violations');
    await page.getByLabel('Name', { exact: true }).fill('web');
    await page.getByLabel('Repository URL').fill('-upload-pack=evil');
    await page.getByRole('button', { name: 'Create project' }).click();
    await page.locator('#repository-error').waitFor();
    t.match(await page.locator('#repository-error').textContent(), /^repository: /);
    await page.getByLabel('Repository URL').fill(repo.url);
    await page.getByRole('button', { name: 'Create project' }).click();
    await page.waitForURL(/\/projects\/acme\/web$/);
    await page.getByRole('heading', { name: 'Settings' }).waitFor();
    await parsed(kiln, ada.token, '/projects/acme/web/details', ProjectDetails);
  });

  await t.test('settings: check the repository, deactivate and activate', async (t) => {
    await page.getByRole('button', { name: 'Check repository' }).click();
    await page.getByTestId('repository-check').getByText(/Reachable: \d+ refs/).waitFor();
    t.match(await page.getByTestId('repository-check').textContent(), /main/);
    await page.getByRole('button', { name: 'Deactivate project' }).click();
    await page.getByTestId('project-state').getByText('inactive').waitFor();
    t.equal(await page.getByRole('button', { name: 'Evaluate' }).isDisabled(), true, 'an inactive project is not evaluated');
    await page.getByRole('button', { name: 'Activate project', exact: true }).click();
    await page.getByTestId('project-state').getByText('active', { exact: true }).waitFor();
    await page.getByLabel('Attribute wildcard').fill('packages.*.app');
    await page.getByRole('button', { name: 'Save settings' }).click();
    await page.getByText('Saved.').waitFor();
    t.equal((await parsed(kiln, ada.token, '/projects/acme/web', ProjectView)).wildcard, 'packages.*.app');
  });

  await t.test('settings: cancel superseded evaluations and approval of forks\' pull requests', async (t) => {
    const cancel = page.getByLabel(/Cancel superseded evaluations/);
    const approval = page.getByLabel(/Require approval for pull requests from forks/);
    t.equal(await cancel.isChecked(), true, 'cancelling is on by default');
    t.equal(await approval.isChecked(), false, 'approval is off by default');
    await cancel.uncheck();
    await approval.check();
    await page.getByRole('button', { name: 'Save settings' }).click();
    await eventually(async () => (await parsed(kiln, ada.token, '/projects/acme/web', ProjectView)).requires_approval, { message: 'saved' });
    t.match(await parsed(kiln, ada.token, '/projects/acme/web', ProjectView), { cancel_superseded: false, requires_approval: true }, 'the API has both');
    await page.reload();
    await page.getByRole('heading', { name: 'Settings' }).waitFor();
    t.equal(await page.getByLabel(/Cancel superseded evaluations/).isChecked(), false, 'shown as saved after a reload');
    t.equal(await page.getByLabel(/Require approval for pull requests from forks/).isChecked(), true);
    await page.getByLabel(/Cancel superseded evaluations/).check();
    await page.getByLabel(/Require approval for pull requests from forks/).uncheck();
    await page.getByRole('button', { name: 'Save settings' }).click();
    await eventually(async () => (await parsed(kiln, ada.token, '/projects/acme/web', ProjectView)).cancel_superseded, { message: 'saved back' });
    t.match(await parsed(kiln, ada.token, '/projects/acme/web', ProjectView), { cancel_superseded: true, requires_approval: false });
  });

  await t.test('tasks: star the default task', async (t) => {
    await page.getByRole('button', { name: /Star default/ }).click();
    await page.getByRole('button', { name: /Starred default/ }).waitFor();
    t.equal(await page.getByTestId('stars-default').textContent(), '1');
    const details = await parsed(kiln, ada.token, '/projects/acme/web/details', ProjectDetails);
    t.match(details.tasks[0], { name: 'default', stars: 1, starred: true });
    t.same((await parsed(kiln, ada.token, '/projects/acme', z.array(ProjectView))).map((p) => p.name), ['web']);
  });

  await t.test('task actions: add a web request to the default task', async (t) => {
    await page.getByRole('button', { name: 'Actions of default' }).click();
    const actions = page.getByTestId('actions-default');
    await actions.getByText('No actions.').waitFor();
    await actions.getByLabel('Action name').fill('notify');
    await actions.getByLabel('URL').fill(receiver.url);
    await actions.getByLabel(/^Events/).fill('evaluation.*');
    await actions.getByRole('button', { name: 'Add action' }).click();
    await actions.getByRole('listitem').filter({ hasText: 'notify' }).waitFor();
    t.ok((await actions.getByRole('textbox', { name: 'Action signing secret' }).inputValue()).length >= 32, 'its secret, once');
    const [action] = await parsed(kiln, ada.token, '/tasks/web/default/actions', z.array(TaskActionView));
    t.match(action, { name: 'notify', kind: 'send_web_request', events: ['evaluation.*'] });
  });

  await t.test('webhooks: the secret once, a test ping in the delivery history, redeliver', async (t) => {
    await page.getByLabel('Payload URL').fill('ftp://example.test/hook');
    await page.getByRole('button', { name: 'Add webhook' }).click();
    await page.locator('#webhook-url-error').waitFor();
    t.match(await page.locator('#webhook-url-error').textContent(), /^url: /, "the API's message under the URL field");
    await page.getByLabel('Payload URL').fill(receiver.url);
    await page.getByRole('button', { name: 'Add webhook' }).click();
    const secret = await page.getByRole('textbox', { name: 'Webhook signing secret' }).inputValue();
    t.ok(secret.length >= 32, 'the signing secret is shown');
    await page.getByRole('button', { name: 'Send test ping' }).click();
    const deliveries = page.getByTestId('deliveries');
    await deliveries.getByRole('cell', { name: 'webhook.ping' }).waitFor();
    await receiver.waitFor(1);
    t.match(await deliveries.textContent(), /delivered/);
    await deliveries.getByRole('button', { name: 'Redeliver' }).first().click();
    await page.getByText('Redelivered: delivered').waitFor();
    await deliveries.getByRole('cell', { name: 'webhook.ping' }).nth(1).waitFor();
    await receiver.waitFor(2);
    const [hook] = await parsed(kiln, ada.token, '/projects/web/webhooks', z.array(WebhookView));
    t.equal((await parsed(kiln, ada.token, `/projects/web/webhooks/${hook!.id}/deliveries`, DeliveryPage)).total, 2);
  });

  await t.test('workers: the peer token is shown once', async (t) => {
    await page.getByLabel('Name (optional)').fill('runner-1');
    await page.getByRole('button', { name: 'Register worker token' }).click();
    const token = await page.getByRole('textbox', { name: 'Worker peer token' }).inputValue();
    t.ok(token.length >= 32, 'the token is shown');
    await page.getByTestId('workers').getByRole('cell', { name: 'runner-1', exact: true }).waitFor();
    const [registration] = await parsed(kiln, ada.token, '/projects/web/workers', z.array(WorkerRegistrationView));
    t.equal(registration?.name, 'runner-1');
    t.notOk(JSON.stringify(registration).includes(token), 'the list never carries the token');
  });

  await t.test('members: invite, the pending list, revoke', async (t) => {
    await page.getByLabel('Username', { exact: true }).fill('bea');
    await page.getByRole('button', { name: 'Send invitation' }).click();
    await page.getByRole('status').filter({ hasText: 'Invitation sent to bea' }).waitFor();
    const pending = page.getByTestId('invitations');
    await pending.getByRole('cell', { name: 'bea', exact: true }).waitFor();
    t.same((await parsed(kiln, ada.token, '/projects/web/invitations', z.array(InvitationView))).map((i) => i.user), ['bea']);
    await page.getByLabel('Username', { exact: true }).fill('bea');
    await page.getByRole('button', { name: 'Send invitation' }).click();
    await page.getByRole('alert').filter({ hasText: /already has an open invitation/ }).waitFor();
    t.same(await seriousAccessibilityViolations(page), [], 'project page: no serious or critical axe violations');
    await page.evaluate('window.scrollTo(0, 0)');
    await screenshot(page, 'project');
    await page.getByRole('button', { name: 'Revoke invitation of bea' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke' }).click();
    await page.getByText('No open invitations.').waitFor();
    t.same(await parsed(kiln, ada.token, '/projects/web/invitations', z.array(InvitationView)), []);
  });

  await t.test('Evaluate opens the evaluation page; the list shows it', async (t) => {
    await page.getByRole('button', { name: 'Evaluate' }).click();
    await page.waitForURL(/\/evals\/[0-9a-f-]{36}$/);
    const id = page.url().split('/').pop()!;
    await page.goto(`${kiln.url}/projects/acme/web`);
    await page.getByTestId('evaluations').getByRole('link', { name: id.slice(0, 8) }).waitFor();
    const list = await parsed(kiln, ada.token, '/projects/acme/web/evaluations?per_page=5', ProjectEvaluationsPage);
    t.match(list, { total: 1, page: 1, per_page: 5 });
    t.equal(list.evaluations[0]?.id, id);
    t.equal(await page.getByTestId('evaluation-trigger').textContent(), 'manual', 'the list says what started it');
    // Evaluations a Git host started (rows written as the webhook path writes them): the list and the page name the branch or pull request.
    const [task] = await kiln.sql<{ id: string }[]>`select t.id from tasks t join projects p on p.id = t.project_id where p.name = 'web' and t.name = 'default'`;
    const [push] = await kiln.sql<{ id: string }[]>`
      insert into evaluations (task_id, repository, wildcard, phase, trigger, branch) values (${task!.id}, 'file:///x', '*', 'completed', 'push', 'main') returning id`;
    await kiln.sql`insert into evaluations (task_id, repository, wildcard, phase, trigger, pull_request) values (${task!.id}, 'file:///x', '*', 'completed', 'pull_request', 12)`;
    await page.reload();
    const triggers = page.getByTestId('evaluation-trigger');
    await triggers.nth(2).waitFor();
    t.same((await triggers.allTextContents()).sort(), ['manual', 'pull request #12', 'push to main']);
    await page.goto(`${kiln.url}/evals/${push!.id}`);
    await page.getByTestId('trigger').getByText('push to main').waitFor();
  });

  await t.test('the evaluations list pages: 20 newer evaluations push the first three to page 2', async (t) => {
    const [task] = await kiln.sql<{ id: string }[]>`select t.id from tasks t join projects p on p.id = t.project_id where p.name = 'web' and t.name = 'default'`;
    await kiln.sql`
      insert into evaluations (task_id, repository, wildcard, phase, trigger, branch, created_at)
      select ${task!.id}, 'file:///x', '*', 'completed', 'push', 'feature', now() + make_interval(secs => n) from generate_series(1, 20) n`;
    await page.goto(`${kiln.url}/projects/acme/web`);
    const pager = page.getByRole('navigation', { name: 'Evaluations pages' });
    await pager.getByText('Page 1 of 2 · 23 in all').waitFor();
    const triggers = page.getByTestId('evaluation-trigger');
    t.same(new Set(await triggers.allTextContents()), new Set(['push to feature']), 'page 1: the 20 newest');
    t.equal(await triggers.count(), 20);
    await pager.getByRole('button', { name: 'Next' }).click();
    await pager.getByText('Page 2 of 2 · 23 in all').waitFor();
    await triggers.filter({ hasText: 'manual' }).waitFor();
    t.same((await triggers.allTextContents()).sort(), ['manual', 'pull request #12', 'push to main'], 'page 2: the three older ones');
    const second = await parsed(kiln, ada.token, '/projects/acme/web/evaluations?page=2&per_page=20', ProjectEvaluationsPage);
    t.same(await page.getByTestId('evaluations').locator('tbody a').allTextContents(), second.evaluations.map((e) => e.id.slice(0, 8)), "the API's second page, in its order");
    await pager.getByRole('button', { name: 'Previous' }).click();
    await pager.getByText('Page 1 of 2 · 23 in all').waitFor();
    t.equal(await pager.getByRole('button', { name: 'Previous' }).isDisabled(), true, 'no page before the first');
  });

  await t.test('delete a project after confirming', async (t) => {
    t.equal((await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'old', repository: repo.url } })).status, 200);
    await page.goto(`${kiln.url}/projects/acme/old`);
    await page.getByRole('button', { name: 'Delete project' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete old' }).click();
    await page.waitForURL(/\/orgs\/acme$/);
    await page.getByTestId('org-projects').getByRole('link', { name: 'web' }).waitFor();
    t.equal(await page.getByTestId('org-projects').getByRole('link', { name: 'old' }).count(), 0);
    t.equal((await kiln.api('GET', '/projects/acme/old', { token: ada.token })).status, 404);
    // The evaluation page is another area's route: where it is not built yet the router reports a 404.
    t.same(problems.filter((p) => !/status of (400|404|409)/.test(p) && !/Not found: \/evals\//.test(p)), [], 'no console errors beyond the refused requests');
  });

  await t.test("another user sees not-found pages for ada's organization and project", async (t) => {
    const other = await openPage(t, browser);
    await signIn(other.page, kiln, bea, '/orgs/acme');
    await other.page.getByRole('heading', { name: 'Not found' }).waitFor();
    t.match(await other.page.getByRole('alert').textContent(), /no organization "acme"/);
    t.same(await seriousAccessibilityViolations(other.page), [], 'not found: no serious or critical axe violations');
    await screenshot(other.page, 'organization-not-found');
    await other.page.goto(`${kiln.url}/projects/acme/web`);
    await other.page.getByRole('heading', { name: 'Not found' }).waitFor();
    t.match(await other.page.getByRole('alert').textContent(), /no project "acme\/web"/);
    t.equal(await other.page.getByRole('button', { name: 'Evaluate' }).count(), 0, 'nothing of the project shows');
  });
});
