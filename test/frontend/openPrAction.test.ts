// The open_pr action in the web UI (docs/git-hosts.md "open_pr"), against a real kiln serve and
// Chromium: on the project page, a task's actions take a pull request action (command one argument
// per line, branch, author); a bad branch is refused under its field; the saved action is what the
// API answers (TaskActionView); its last run (open_pr_runs, as the runner leaves it) is shown:
// waiting for a retry with the host's error, then the pull request it opened with its link.
import t from 'tap';
import { z } from 'zod';
import { TaskActionView } from '../../protocol/api/webhooks.js';
import { signUp, type TestAccount } from '../support/accounts.js';
import { launchBrowser, openPage, screenshot, seriousAccessibilityViolations } from '../support/browser.js';
import { createTestCache } from '../support/caches.js';
import { startTestKiln, type TestKiln } from '../support/kiln.js';
import type { Page } from 'playwright-core';

async function signIn(page: Page, kiln: TestKiln, account: TestAccount, path: string): Promise<void> {
  await page.goto(`${kiln.url}/login?next=${encodeURIComponent(path)}`);
  await page.getByLabel('Username or e-mail').fill(account.username);
  await page.getByLabel('Password').fill(account.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

t.test('open_pr action: configured in the task\'s actions, saved, its last run shown', async (t) => {
  const kiln = await startTestKiln(t);
  const browser = await launchBrowser(t);
  await signUp(kiln, 'root');
  const ada = await signUp(kiln, 'ada');
  await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } });
  t.equal((await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'app', repository: 'file:///nonexistent', wildcard: 'packages.x86_64-linux.*' } })).status, 200);
  const cache = await createTestCache(kiln.sql, 'main');
  await kiln.sql`insert into subscriptions (project_id, cache_id, mode) select id, ${cache.id}, 0 from projects where name = 'app'`;
  const actionsOf = async () => {
    const res = await kiln.api('GET', '/tasks/app/default/actions', { token: ada.token });
    return z.array(TaskActionView).parse(res.message);
  };

  const { page } = await openPage(t, browser);
  page.setDefaultTimeout(10_000);
  await signIn(page, kiln, ada, '/projects/acme/app');
  await page.getByRole('button', { name: 'Actions of default' }).click();
  const actions = page.getByTestId('actions-default');
  await actions.getByText('No actions.').waitFor();

  await actions.getByLabel('Kind').selectOption('open_pr');
  t.equal(await actions.getByLabel('URL').count(), 0, 'no URL or events for a pull request action');
  await actions.getByLabel('Action name').fill('update inputs');
  await actions.getByLabel(/^Command/).fill('nix\nflake\nupdate\n--commit-lock-file');
  await actions.getByLabel(/^Branch/).fill('kiln/../main');
  await actions.getByRole('button', { name: 'Add action' }).click();
  await page.locator('#action-branch-default-error').waitFor();
  t.match(await page.locator('#action-branch-default-error').textContent(), /branch/, 'a branch git refuses, under its field');
  t.same(await actionsOf(), [], 'nothing saved');

  await actions.getByLabel(/^Branch/).fill('kiln/flake-update');
  await actions.getByLabel(/^Author name/).fill('Kiln Bot');
  await actions.getByLabel('Author e-mail').fill('bot@acme.invalid');
  await actions.getByRole('button', { name: 'Add action' }).click();
  await actions.getByRole('listitem').filter({ hasText: 'update inputs' }).waitFor();
  const [saved] = await actionsOf();
  t.match(saved, {
    name: 'update inputs', kind: 'open_pr', command: ['nix', 'flake', 'update', '--commit-lock-file'], branch: 'kiln/flake-update',
    commit_name: 'Kiln Bot', commit_email: 'bot@acme.invalid', events: [], last_run: null,
  }, 'saved as the form said, one argument per line');
  await actions.getByTestId('last-run-update inputs').getByText('Not run yet.').waitFor();
  t.match(await actions.getByRole('listitem').filter({ hasText: 'update inputs' }).textContent(), /nix flake update --commit-lock-file → kiln\/flake-update/);

  // A run as the runner leaves it: waiting for another try after the host's error, then opened.
  const evaluated = await kiln.api<string>('POST', '/tasks/app/default/evaluate', { token: ada.token, body: { commit: 'a'.repeat(40) } });
  t.equal(evaluated.status, 200, JSON.stringify(evaluated.message));
  const [run] = await kiln.sql<{ id: string }[]>`
    insert into open_pr_runs (evaluation_id, task_action_id, status, attempts, pushed, error, next_attempt_at)
    values (${evaluated.message}, ${saved!.id}, 'retrying', 1, ${'b'.repeat(40)}, 'the Git host: POST /repos/{owner}/{repo}/pulls: 502 bad gateway', now() + interval '30 seconds')
    returning id`;
  await page.reload();
  await page.getByRole('button', { name: 'Actions of default' }).click();
  const lastRun = page.getByTestId('actions-default').getByTestId('last-run-update inputs');
  await lastRun.getByText('failed, tried again').waitFor();
  t.match(await lastRun.textContent(), /502 bad gateway/, 'the host\'s error');
  t.match(await lastRun.textContent(), /next try/, 'and when it is tried again');
  t.equal(await lastRun.getByRole('link', { name: 'the evaluation' }).getAttribute('href'), `/evals/${evaluated.message}`);

  await kiln.sql`
    update open_pr_runs set status = 'opened', attempts = 2, error = null, next_attempt_at = null, pull_request = 7,
      url = 'https://git.example.test/acme/app/pull/7', finished_at = now(), updated_at = now()
    where id = ${run!.id}`;
  await page.reload();
  await page.getByRole('button', { name: 'Actions of default' }).click();
  await lastRun.getByText('pull request opened').waitFor();
  t.equal(await lastRun.getByRole('link', { name: 'pull request #7' }).getAttribute('href'), 'https://git.example.test/acme/app/pull/7');
  t.match(await lastRun.textContent(), /2 tries/);
  t.match((await actionsOf())[0], { last_run: { status: 'opened', pull_request: 7, attempts: 2, evaluation_id: evaluated.message } }, 'the API says the same');
  t.same(await seriousAccessibilityViolations(page), [], 'no serious or critical axe violations');
  await screenshot(page, 'project-open-pr-action');

  // A URL stored before the server checked the host's answers never becomes a link.
  await kiln.sql`update open_pr_runs set url = 'javascript:alert(document.domain)' where id = ${run!.id}`;
  await page.reload();
  await page.getByRole('button', { name: 'Actions of default' }).click();
  await lastRun.getByText('pull request opened').waitFor();
  t.match(await lastRun.textContent(), /pull request #7/, 'the pull request is still named');
  t.equal(await lastRun.getByRole('link', { name: 'pull request #7' }).count(), 0, 'a javascript: URL is no link');
});
