// The evaluation page's early rows (frontend/scripts/earlyRows.client.js) in real Chromium against a
// real kiln serve: with the shell's modules held back, the first builds are drawn from the early read
// alone, as text (a tenant's markup in a build name stays text), with their links; once the shell
// boots, the page's own table replaces them (one table, no early rows left), and they are never drawn
// for a visitor without a session or on another page.
import t from 'tap';
import { signUp } from '../support/accounts.js';
import { builtFrontend, launchBrowser, openPage, seriousAccessibilityViolations } from '../support/browser.js';
import { startTestKiln } from '../support/kiln.js';

builtFrontend();

t.test('early rows stand in for the evaluation page until it mounts', async (t) => {
  const kiln = await startTestKiln(t, { 'projects.allowLocalRepositories': true });
  const browser = await launchBrowser(t);
  const ada = await signUp(kiln, 'ada');
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await kiln.api(method, path, { token: ada.token, body });
    t.ok(res.status < 300, `${method} ${path}: ${res.status}`);
  };
  await call('PUT', '/orgs', { name: 'acme' });
  await call('PUT', '/projects/acme', { name: 'app', repository: 'file:///nonexistent' });
  const { sql } = kiln;
  const [task] = await sql<{ id: string }[]>`select t.id from tasks t join projects p on p.id = t.project_id where p.name = 'app' and t.name = 'default'`;
  // A completed evaluation of 30 builds, written in one statement; the first build (in drv_path
  // order) has markup in its name.
  const [evaluation] = await sql<{ id: string }[]>`
    with e as (
      insert into evaluations (task_id, repository, wildcard, phase, commit, started_at, finished_at)
      values (${task!.id}, 'file:///nonexistent', 'packages.*', 'completed', ${'a'.repeat(40)}, now() - interval '2 minutes', now()) returning id
    ), d as (
      insert into derivations (drv_path, name, system, outputs)
      select '/nix/store/' || lpad(i::text, 32, '0') || '-' || n || '.drv', n, 'x86_64-linux', '{}'
      from generate_series(1, 30) i, lateral (select case when i = 1 then '<img src=x onerror=alert(1)>evil' else 'pkg-' || i end as n) names
      returning id
    ), db as (
      insert into derivation_builds (derivation_id, status, started_at, finished_at)
      select id, 'completed', now() - interval '90 seconds', now() from d returning id
    ), b as (insert into builds (evaluation_id, derivation_build_id) select e.id, db.id from e, db)
    select id from e`;
  const url = `${kiln.url}/evals/${evaluation!.id}`;

  t.test('drawn from the early read while the shell is held back, then replaced by the page', async (t) => {
    const { page, context, problems } = await openPage(t, browser);
    await context.addInitScript({ content: `sessionStorage.setItem('kiln.session', ${JSON.stringify(ada.token)});` });
    // Hold the shell's boot (SvelteKit's start module) until the early rows have been looked at.
    let release!: () => void;
    const held = new Promise<void>((resolve) => { release = resolve; });
    await page.route(/\/_app\/immutable\/entry\/start\.[^/]+\.js$/, async (route) => {
      await held;
      await route.continue();
    });
    await page.goto(url, { waitUntil: 'commit' });
    const early = page.locator('#kiln-early-rows');
    await early.getByRole('row').nth(1).waitFor();
    t.equal(await page.locator('#content').count(), 0, 'the shell has not mounted');
    const rows = early.locator('.vscroll [role="row"]');
    t.equal(await rows.count(), 20, 'the first 20 builds are drawn');
    const first = rows.first().getByRole('link');
    t.equal(await first.textContent(), '<img src=x onerror=alert(1)>evil', 'a build name is text, never markup');
    t.equal(await early.locator('img').count(), 0, 'no element came from the name');
    const [build] = await sql<{ id: string }[]>`
      select b.id from builds b join derivation_builds db on db.id = b.derivation_build_id join derivations d on d.id = db.derivation_id
      where b.evaluation_id = ${evaluation!.id} order by d.drv_path limit 1`;
    t.equal(await first.getAttribute('href'), `/builds/${build!.id}`, 'the row links to its build');
    t.match(await rows.first().textContent(), /x86_64-linux.*completed.*1m 30s/, 'system, status and time as the page shows them');
    t.equal(await early.getByRole('table', { name: 'Builds of this evaluation' }).getAttribute('aria-rowcount'), '31', 'the table says how many builds there are');

    release();
    await page.locator('#content .vscroll [role="row"] a').first().waitFor();
    await early.waitFor({ state: 'detached' });
    t.equal(await page.getByRole('table', { name: 'Builds of this evaluation' }).count(), 1, 'one builds table: the page\'s own');
    t.same(await seriousAccessibilityViolations(page), [], 'no serious or critical axe violations');
    t.same(problems, [], 'no console errors');
  });

  t.test('not drawn without a session, nor kept on another page', async (t) => {
    const { page } = await openPage(t, browser);
    await page.goto(url);
    await page.getByRole('heading', { name: 'Sign in', level: 1 }).waitFor();
    t.equal(await page.locator('#kiln-early-rows').count(), 0, 'a visitor without a session gets no early rows');

    const signedIn = await openPage(t, browser);
    await signedIn.context.addInitScript({ content: `sessionStorage.setItem('kiln.session', ${JSON.stringify(ada.token)});` });
    await signedIn.page.goto(url);
    await signedIn.page.locator('#content .vscroll [role="row"] a').first().waitFor();
    await signedIn.page.getByRole('link', { name: 'Home' }).click();
    await signedIn.page.getByRole('heading', { name: 'Home', level: 1 }).waitFor();
    t.equal(await signedIn.page.locator('#kiln-early-rows').count(), 0, 'no early rows on Home');
    t.equal(await signedIn.page.locator('.vtable').count(), 0, 'no builds table on Home');
  });
});
