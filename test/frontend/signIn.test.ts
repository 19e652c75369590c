// The sign-in, registration, Home and sign-out pages in real Chromium against a real kiln serve.
import t from 'tap';
import { signUp } from '../support/accounts.js';
import { launchBrowser, openPage, screenshot, seriousAccessibilityViolations } from '../support/browser.js';
import { startTestKiln } from '../support/kiln.js';

t.test('sign-in, Home, sign-out and registration', async (t) => {
  const kiln = await startTestKiln(t);
  const browser = await launchBrowser(t);
  const ada = await signUp(kiln, 'ada');
  const created = [
    await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } }),
    await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'web', repository: 'https://example.test/web.git' } }),
    await kiln.api('PUT', '/caches', { token: ada.token, body: { name: 'main', description: 'the main cache' } }),
  ];
  t.same(created.map((r) => r.status), [200, 200, 200], 'the API has an organization, a project and a cache');
  // An evaluation as a push writes it (the project's repository is not fetched here).
  const [evaluation] = await kiln.sql<{ id: string }[]>`
    insert into evaluations (task_id, repository, wildcard, phase, trigger, branch)
    select t.id, 'file:///x', '*', 'completed', 'push', 'main' from tasks t join projects p on p.id = t.project_id where p.name = 'web'
    returning id`;

  t.test('a visitor is sent to sign-in; a wrong password is shown; the right one lands on Home listing what the API has', async (t) => {
    const { page, problems } = await openPage(t, browser);
    await page.goto(kiln.url + '/');
    await page.waitForURL(/\/login\?next=%2F$/);
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    t.same(await seriousAccessibilityViolations(page), [], 'sign-in: no serious or critical axe violations');
    await screenshot(page, 'sign-in');

    await page.getByLabel('Username or e-mail').fill('ada');
    await page.getByLabel('Password').fill('not-the-password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    t.match(await page.getByRole('alert').first().textContent(), /password|credentials|invalid/i, "the API's refusal is shown");

    await page.getByLabel('Password').fill(ada.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Home' }).waitFor();
    await page.getByTestId('projects').getByText('acme/web').waitFor();
    t.match(await page.getByTestId('orgs').textContent(), /acme/);
    t.match(await page.getByTestId('caches').textContent(), /main/);
    t.match(await page.getByTestId('caches').textContent(), /the main cache/);
    const recent = page.getByTestId('recent-evaluations');
    t.match(await recent.textContent(), /acme\/web.*push to main/s, 'the recent evaluation with its project and trigger');
    t.equal(await recent.getByRole('link').first().getAttribute('href'), `/evals/${evaluation!.id}`, 'linked to its page');
    t.equal(await recent.locator('.status').first().textContent(), 'completed', 'and its phase');
    t.same(await seriousAccessibilityViolations(page), [], 'Home: no serious or critical axe violations');
    await screenshot(page, 'home');
    // The wrong password's 401 is the one failed request the browser reports.
    t.same(problems.filter((p) => !/status of 401/.test(p)), [], 'no other console errors and no CSP violations');
  });

  t.test('sign-out revokes the session on the server', async (t) => {
    const { page } = await openPage(t, browser);
    await page.goto(kiln.url + '/login');
    await page.getByLabel('Username or e-mail').fill('ada');
    await page.getByLabel('Password').fill(ada.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Home' }).waitFor();
    const token = await page.evaluate(() => sessionStorage.getItem('kiln.session'));
    t.ok(token, 'the token is in sessionStorage (no "remember me")');
    t.equal(await page.evaluate(() => localStorage.getItem('kiln.session')), null, 'and not in localStorage');
    t.equal((await kiln.api('GET', '/user', { token: token! })).status, 200);

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(/\/login$/);
    t.equal(await page.evaluate(() => sessionStorage.getItem('kiln.session')), null, 'the browser forgot it');
    t.equal((await kiln.api('GET', '/user', { token: token! })).status, 401, 'the server no longer accepts it');
  });

  t.test("registration: the API's message stands next to the field it names; then Home", async (t) => {
    const { page, problems } = await openPage(t, browser);
    await page.goto(kiln.url + '/register');
    await page.getByRole('heading', { name: 'Register' }).waitFor();
    t.same(await seriousAccessibilityViolations(page), [], 'register: no serious or critical axe violations');
    await page.getByLabel('Username').fill('bea');
    await page.getByLabel('E-mail').fill('bea@example.test');
    await page.getByLabel('Password').fill('short');
    await page.getByRole('button', { name: 'Create account' }).click();
    const passwordError = page.locator('#password-error');
    await passwordError.waitFor();
    t.match(await passwordError.textContent(), /password: .*8/, 'under the password field');
    t.equal(await page.getByLabel('Password').getAttribute('aria-invalid'), 'true');
    await screenshot(page, 'register-error');

    await page.getByLabel('Password').fill('a-long-enough-password');
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.getByRole('heading', { name: 'Home' }).waitFor();
    t.match(await page.getByText('You belong to no organization yet.').textContent(), /no organization/);
    t.same(problems.filter((p) => !/status of 400/.test(p)), [], 'no console errors beyond the refused request');
  });

  t.test('a path no page answers says so in words, with a way Home', async (t) => {
    const { page, problems } = await openPage(t, browser);
    await page.addInitScript((value) => sessionStorage.setItem('kiln.session', value), ada.token);
    await page.goto(kiln.url + '/no/such/page');
    await page.getByRole('heading', { name: 'Page not found' }).waitFor();
    t.equal(await page.getByRole('alert').textContent(), 'There is no page at /no/such/page.');
    t.ok(await page.getByRole('navigation', { name: 'main' }).isVisible(), 'inside the usual frame');
    t.same(await seriousAccessibilityViolations(page), [], 'not found: no serious or critical axe violations');
    await screenshot(page, 'page-not-found');
    await page.getByRole('link', { name: 'Go to Home' }).click();
    await page.getByRole('heading', { name: 'Home' }).waitFor();
    // The router reports the unknown path on the console; nothing else may.
    t.same(problems.filter((p) => !/Not found: \/no\/such\/page/.test(p)), [], 'no other console errors and no CSP violations');
  });
});
