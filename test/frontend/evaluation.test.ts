// The evaluation and build pages in real Chromium against a real kiln serve with a real worker and
// real Nix: register, an organization, a project on a file:// flake, a cache, the subscription that
// releases the waiting evaluation; the evaluation page turns completed live; a build's log (ANSI
// colours), dependencies, download and closure graph; abort with confirmation; another user's 404.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { z } from 'zod';
import { BuildProductView, BuildView, ClosureGraphView, EntryPointView, EvaluationView } from '../../protocol/api/evaluations.js';
import { signUp } from '../support/accounts.js';
import { launchBrowser, openPage, screenshot, seriousAccessibilityViolations } from '../support/browser.js';
import { createFlakeRepo, shellFlake } from '../support/flakeRepo.js';
import { startTestKiln } from '../support/kiln.js';
import { requireNix } from '../support/nixStore.js';
import { spawnWorker } from '../support/workerProcess.js';

requireNix();

const flake = (nonce: string) => shellFlake(nonce, `      base = mk "kiln-ui-base" "echo building base; mkdir $out; echo base > $out/data";
      app = mk "kiln-ui-app" "echo building app; printf '\\\\033[31mred words\\\\033[0m\\\\n'; echo '<img src=x onerror=alert(1)><b>tenant markup</b>'; mkdir -p $out/nix-support; cat \${base}/data > $out/copied; echo \${base} > $out/base-path; echo file binary-dist $out/copied > $out/nix-support/hydra-build-products";
      broken = mk "kiln-ui-broken" "echo about to fail; exit 3";`);

// Real Nix builds on a shared machine: generous, like the other flow tests (KILN_FLOW_TIMEOUT).
t.test('evaluation and build pages', { timeout: Number(process.env['KILN_FLOW_TIMEOUT'] ?? 300_000) }, async (t) => {
  const kiln = await startTestKiln(t, { localWorker: true, 'build.retryBackoffSecs': 0 });
  const work = mkdtempSync(join(tmpdir(), 'kiln-ui-eval-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));
  const repo = createFlakeRepo(join(work, 'repo'), { 'flake.nix': flake(randomBytes(8).toString('hex')) });
  const worker = spawnWorker({ serverUrl: `ws://127.0.0.1:${kiln.port}/proto`, baseDir: join(work, 'worker') });
  t.teardown(() => worker.stop());
  const browser = await launchBrowser(t);
  const { page, problems } = await openPage(t, browser);

  // Register in the browser; the organization, project and cache through the API with that session
  // (their pages are tested with their own areas).
  await page.goto(kiln.url + '/register');
  await page.getByLabel('Username').fill('ada');
  await page.getByLabel('E-mail').fill('ada@example.test');
  await page.getByLabel('Password').fill('a-long-enough-password');
  await page.getByRole('button', { name: 'Create account' }).click();
  await page.getByRole('heading', { name: 'Home' }).waitFor();
  const token = (await page.evaluate(() => sessionStorage.getItem('kiln.session')))!;
  const call = async <T>(method: 'GET' | 'PUT' | 'POST', path: string, body?: unknown): Promise<T> => {
    const r = await kiln.api<T>(method, path, { token, ...(body === undefined ? {} : { body }) });
    if (r.status !== 200) throw new Error(`${method} ${path}: ${r.status} ${String(r.message)}`);
    return r.message;
  };
  await call('PUT', '/orgs', { name: 'acme' });
  await call('PUT', '/projects/acme', { name: 'app', repository: repo.url, wildcard: 'packages.x86_64-linux.*' });
  await call('PUT', '/projects/acme', { name: 'idle', repository: repo.url, wildcard: 'packages.x86_64-linux.*' });
  await call('PUT', '/caches', { name: 'main' });

  // Without a writable cache the evaluation waits: the page shows it, then the subscription releases it.
  const evaluationId = await call<string>('POST', '/projects/acme/app/evaluate');
  await page.goto(`${kiln.url}/evals/${evaluationId}`);
  await page.getByRole('heading', { name: 'Evaluation' }).waitFor();
  const phase = page.getByTestId('phase');
  await phase.getByText(/^(queued|waiting)$/).waitFor();
  await page.getByText('live', { exact: true }).waitFor();

  t.test('the evaluation turns completed live, with its builds', async (t) => {
    const subscribed = await call<string>('POST', '/projects/app/subscribe/main', { mode: 0 });
    if (subscribed !== 'Subscribed') {
      const [request] = await call<{ id: string }[]>('GET', '/caches/main/subscription-requests');
      await call('POST', `/caches/main/subscription-requests/${request!.id}/approve`);
    }
    // No reload: the live socket brings the phases and the builds.
    await phase.getByText('completed', { exact: true }).waitFor({ timeout: 120_000 });
    const table = page.getByRole('table', { name: 'Builds of this evaluation' });
    await table.getByRole('row').filter({ hasText: 'kiln-ui-broken' }).getByText('failed', { exact: true }).waitFor();
    await table.getByRole('row').filter({ hasText: 'kiln-ui-app' }).getByText('completed', { exact: true }).waitFor();
    t.match(await page.getByText(/Builds finished: \d+ of \d+/).textContent(), /Builds finished: 3 of 3/);
    t.equal(await page.getByRole('button', { name: 'Abort evaluation' }).count(), 0, 'a finished evaluation offers no abort');
    t.same(await seriousAccessibilityViolations(page), [], 'evaluation: no serious or critical axe violations');
    await screenshot(page, 'evaluation');

    await page.getByLabel('failed (1)').check();
    await page.getByText('1 of 3 builds shown').waitFor();
    t.same((await table.getByRole('cell').getByRole('link').allTextContents()), ['kiln-ui-broken'], 'the failed filter shows the failed build');
    await page.getByLabel('all (3)').check();
    await page.getByText('3 of 3 builds shown').waitFor();

    // The views the pages read, parsed with their schemas, so a drift in the server fails here.
    EvaluationView.parse(await call('GET', `/evals/${evaluationId}`));
    z.array(BuildView).parse(await call('GET', `/evals/${evaluationId}/builds`));
  });

  t.test("a build: log with colours, dependencies, download, closure graph", async (t) => {
    await page.getByRole('link', { name: 'kiln-ui-app' }).click();
    await page.getByRole('heading', { name: 'Build kiln-ui-app' }).waitFor();
    await page.getByTestId('build-status').getByText('completed').waitFor();
    const log = page.getByTestId('log');
    await log.getByText('building app').waitFor();
    await page.getByTestId('log-state').getByText(/end of log/).waitFor();
    const red = log.getByText('red words');
    t.equal(await red.getAttribute('class'), 'ansi-red-fg', 'ANSI red becomes a class');
    t.equal(await red.evaluate((e) => e.ownerDocument.defaultView!.getComputedStyle(e).color), 'rgb(255, 123, 114)', "drawn in the log's red");
    t.match(await log.textContent(), /^(?!.*\x1b)/s, 'no escape codes are shown');
    await log.getByText('<img src=x onerror=alert(1)><b>tenant markup</b>').waitFor();
    t.equal(await log.locator('img, b').count(), 0, "a log's markup is shown as text, never rendered");
    await page.getByTestId('dependencies').getByRole('link', { name: 'kiln-ui-base' }).waitFor();

    const download = page.waitForEvent('download');
    await page.getByRole('button', { name: 'copied' }).click();
    const file = await download;
    t.equal(file.suggestedFilename(), 'copied');
    const downloaded = await file.path();
    const { readFileSync } = await import('node:fs');
    t.equal(readFileSync(downloaded, 'utf8'), 'base\n', 'the product downloads with the session');

    const summary = page.getByTestId('closure-summary');
    await summary.getByText(/2 nodes, 1 edges/).waitFor();
    await page.getByTestId('closure-node').nth(1).waitFor();
    t.equal(await page.getByTestId('closure-node').count(), 2, 'the build-time closure is drawn');
    t.equal(await page.getByTestId('closure-truncated').count(), 0, 'not truncated');
    await page.getByRole('radio', { name: /runtime/ }).check();
    await summary.getByText(/2 nodes, 1 edges/).waitFor();
    await page.getByTestId('closure-node').filter({ hasText: 'kiln-ui-app' }).waitFor();
    await page.getByRole('heading', { name: 'Closure graph' }).scrollIntoViewIfNeeded();
    t.same(await seriousAccessibilityViolations(page), [], 'build: no serious or critical axe violations');
    await screenshot(page, 'build');

    const builds = z.array(BuildView).parse(await call('GET', `/evals/${evaluationId}/builds`));
    const app = builds.find((b) => b.name === 'kiln-ui-app')!;
    BuildView.parse(await call('GET', `/builds/${app.build_id}`));
    z.array(BuildProductView).parse(await call('GET', `/builds/${app.build_id}/downloads`));
    ClosureGraphView.parse(await call('GET', `/builds/${app.build_id}/closure`));
    ClosureGraphView.parse(await call('GET', `/builds/${app.build_id}/runtime-closure`));
  });

  t.test('the project page and Home show the entry points with their build status', async (t) => {
    const entryPoints = z.array(EntryPointView).parse(await call('GET', '/projects/acme/app/entry-points'));
    t.same(entryPoints.map((e) => e.build_status).sort(), ['completed', 'completed', 'failed'], 'the API: base and app built, broken failed');
    await page.goto(`${kiln.url}/projects/acme/app`);
    const table = page.getByTestId('entry-points');
    await table.locator('tbody tr').nth(2).waitFor();
    for (const ep of entryPoints) {
      const row = table.getByRole('row').filter({ has: page.getByRole('link', { name: ep.attr!, exact: true }) });
      t.equal(await row.locator('.status').textContent(), ep.build_status, `${ep.attr}: ${ep.build_status}`);
      t.equal(await row.getByRole('link').getAttribute('href'), `/builds/${ep.build_id}`, `${ep.attr}: linked to its build`);
    }
    t.same(await seriousAccessibilityViolations(page), [], 'project with entry points: no serious or critical axe violations');
    await screenshot(page, 'project-entry-points');

    await page.getByRole('navigation', { name: 'main' }).getByRole('link', { name: 'Home' }).click();
    const home = page.getByTestId('projects').getByRole('listitem').filter({ hasText: 'acme/app' });
    await home.getByRole('row').nth(3).waitFor();
    for (const ep of entryPoints) {
      t.equal(await home.getByRole('row').filter({ has: page.getByRole('cell', { name: ep.attr!, exact: true }) }).locator('.status').textContent(), ep.build_status, `Home, ${ep.attr}`);
    }
  });

  t.test('abort asks first; Cancel keeps the evaluation, confirming aborts it', async (t) => {
    // idle has no subscription: its evaluation waits until aborted.
    const idle = await call<string>('POST', '/projects/acme/idle/evaluate');
    const reads: string[] = [];
    const onRequest = (r: { url(): string }) => { if (r.url().includes(`/api/v1/evals/${idle}`)) reads.push(new URL(r.url()).pathname + new URL(r.url()).search); };
    page.on('request', onRequest);
    await page.goto(`${kiln.url}/evals/${idle}`);
    await phase.getByText(/^(queued|waiting)$/).waitFor();
    await page.getByText('This evaluation has no builds.').or(page.getByText(/No builds yet/)).waitFor();
    page.off('request', onRequest);
    // The route's index.html started both first reads before the app booted; the app took each (none is left) and asked for neither again.
    // A string, not a function: this file is compiled without the DOM's types.
    t.same(await page.evaluate("Object.keys(window.kilnEarlyReads ?? { 'no early reads': true })"), [], 'both early reads were taken by the page');
    t.same(reads.filter((r) => !r.endsWith('/live')).sort(), [`/api/v1/evals/${idle}`, `/api/v1/evals/${idle}/builds/page?page=1&per_page=100`], 'each read once');
    await page.getByRole('button', { name: 'Abort evaluation' }).click();
    const dialog = page.getByRole('dialog', { name: 'Abort this evaluation?' });
    await dialog.waitFor();
    t.same(await seriousAccessibilityViolations(page), [], 'abort dialog: no serious or critical axe violations');
    await screenshot(page, 'evaluation-abort');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'hidden' });
    t.match((await call<{ phase: string }>('GET', `/evals/${idle}`)).phase, /^(queued|waiting)$/, 'Cancel aborts nothing');

    await page.getByRole('button', { name: 'Abort evaluation' }).click();
    await dialog.getByRole('button', { name: 'Abort evaluation' }).click();
    await phase.getByText('aborted', { exact: true }).waitFor();
    t.equal((await call<{ phase: string }>('GET', `/evals/${idle}`)).phase, 'aborted');
    t.equal(await page.getByRole('button', { name: 'Abort evaluation' }).count(), 0);
  });

  t.test("another user's evaluation and build are a 404 page", async (t) => {
    const bea = await signUp(kiln, 'bea');
    const other = await openPage(t, browser);
    await other.page.goto(kiln.url + '/login');
    await other.page.getByLabel('Username or e-mail').fill('bea');
    await other.page.getByLabel('Password').fill(bea.password);
    await other.page.getByRole('button', { name: 'Sign in' }).click();
    await other.page.getByRole('heading', { name: 'Home' }).waitFor();
    await other.page.goto(`${kiln.url}/evals/${evaluationId}`);
    t.match(await other.page.getByRole('alert').textContent(), /No such evaluation/);
    const [build] = z.array(BuildView).parse(await call('GET', `/evals/${evaluationId}/builds`));
    await other.page.goto(`${kiln.url}/builds/${build!.build_id}`);
    t.match(await other.page.getByRole('alert').first().textContent(), /No such build/);
    t.same(other.problems.filter((p) => !/status of 404/.test(p)), [], 'nothing but the refused requests');
  });

  t.test('no console errors or CSP violations on the way', async (t) => {
    t.same(problems, []);
  });
});
