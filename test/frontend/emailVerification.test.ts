// E-mail verification in real Chromium: the registration note with a resend form, a sign-in refused
// for an unverified address offering a new link, the mailed link opened in the browser landing on
// the UI's /verify-email page, and a used link offering a new one. Real kiln serve, real SMTP
// stand-in (test/support/smtpServer.ts); frontend.logoUrl shown on both forms.
import t from 'tap';
import { launchBrowser, openPage, screenshot, seriousAccessibilityViolations } from '../support/browser.js';
import { startTestKiln } from '../support/kiln.js';
import { startSmtpServer } from '../support/smtpServer.js';

const LOGO = 'https://logo.example.test/mark.svg';
const linkIn = (text: string) => /(http:\/\/\S+\/api\/v1\/auth\/verify-email\?token=[\w-]+)/.exec(text)?.[1];

t.test('e-mail verification pages', async (t) => {
  const smtp = await startSmtpServer(t);
  const kiln = await startTestKiln(t, {
    'email.enable': true, 'email.requireVerification': true, 'email.smtp.host': '127.0.0.1', 'email.smtp.port': smtp.port,
    'email.smtp.useTls': false, 'email.from.address': 'kiln@example.test', 'frontend.logoUrl': LOGO,
  });
  const browser = await launchBrowser(t);
  // The logo's host does not resolve; its failed load is expected noise.
  const unexpected = (problems: string[], allowed: RegExp) => problems.filter((p) => !/ERR_NAME_NOT_RESOLVED|Failed to load resource/.test(p) || allowed.test(p));

  t.test('registration says to check the e-mail, with the logo, and sends a new link on request', async (t) => {
    const { page, problems } = await openPage(t, browser);
    await page.goto(kiln.url + '/register');
    await page.getByRole('heading', { name: 'Register' }).waitFor();
    t.equal(await page.locator('img.logo').getAttribute('src'), LOGO, 'frontend.logoUrl is shown');
    await page.getByLabel('Username').fill('bea');
    await page.getByLabel('E-mail', { exact: true }).fill('bea@example.test');
    await page.getByLabel('Password').fill('a-long-enough-password');
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.getByText('Check your e-mail').waitFor();
    t.equal(smtp.mails.length, 1, 'the first link is mailed');
    t.equal(await page.getByLabel('E-mail', { exact: true }).inputValue(), 'bea@example.test', 'the resend form has the address');
    t.same(await seriousAccessibilityViolations(page), [], 'no serious or critical axe violations');
    await page.getByRole('button', { name: 'Send link' }).click();
    await page.getByRole('status').filter({ hasText: 'Sent:' }).waitFor();
    t.equal(smtp.mails.length, 2, 'a second link is mailed');
    await screenshot(page, 'register-verify-email');
    t.same(unexpected(problems, /$^/), [], 'no console errors or CSP violations');
  });

  t.test('sign-in of the unverified account is refused and offers a new link', async (t) => {
    const { page, problems } = await openPage(t, browser);
    await page.goto(kiln.url + '/login');
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    t.equal(await page.locator('img.logo').getAttribute('src'), LOGO, 'frontend.logoUrl is shown');
    await page.getByLabel('Username or e-mail').fill('bea@example.test');
    await page.getByLabel('Password').fill('a-long-enough-password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    t.match(await page.getByRole('alert').first().textContent(), /verify/i, "the API's refusal is shown");
    t.equal(await page.getByLabel('E-mail', { exact: true }).inputValue(), 'bea@example.test', 'the resend form has the address typed');
    t.same(await seriousAccessibilityViolations(page), [], 'no serious or critical axe violations');
    await page.getByRole('button', { name: 'Send link' }).click();
    await page.getByRole('status').filter({ hasText: 'Sent:' }).waitFor();
    t.equal(smtp.mails.length, 3, 'a third link is mailed');
    t.same(unexpected(problems, /$^/).filter((p) => !/status of 403/.test(p)), [], 'no console errors beyond the refusal');
  });

  t.test('the mailed link opened in the browser lands on the verified page; sign-in then works', async (t) => {
    const { page, problems } = await openPage(t, browser);
    await page.goto(linkIn(smtp.mails[2]!.text)!);
    await page.getByText('is verified').waitFor();
    t.match(await page.getByRole('status').textContent(), /Your e-mail address is verified/);
    t.equal(new URL(page.url()).pathname, '/verify-email');
    t.equal(new URL(page.url()).hash, '', 'the fragment is gone from the address bar');
    t.same(await seriousAccessibilityViolations(page), [], 'no serious or critical axe violations');
    await screenshot(page, 'verify-email');
    const [row] = await kiln.sql<{ email_verified: boolean }[]>`select email_verified from users where username = 'bea'`;
    t.equal(row!.email_verified, true);

    await page.getByRole('link', { name: 'sign in' }).click();
    await page.getByLabel('Username or e-mail').fill('bea');
    await page.getByLabel('Password').fill('a-long-enough-password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Home' }).waitFor();
    t.same(unexpected(problems, /$^/), [], 'no console errors or CSP violations');
  });

  t.test('a used link says why it failed and offers a new one', async (t) => {
    const { page } = await openPage(t, browser);
    await page.goto(linkIn(smtp.mails[0]!.text)!);
    await page.getByText('The link did not work').waitFor();
    t.match(await page.getByRole('alert').textContent(), /not valid \(it may have been used already/, 'why, from the error code');
    await page.getByRole('button', { name: 'Send link' }).waitFor();
    t.same(await seriousAccessibilityViolations(page), [], 'no serious or critical axe violations');
  });

  t.test('a forged link to the page shows none of its words (content spoofing)', async (t) => {
    const { page } = await openPage(t, browser);
    await page.goto(`${kiln.url}/verify-email#verified=ceo%40corp.test`);
    await page.getByText('is verified').waitFor();
    t.notMatch(await page.locator('main').textContent(), /ceo@corp/, 'no address from the link');
    await page.goto('about:blank');
    await page.goto(`${kiln.url}/verify-email#error=invalid_verification_token&message=${encodeURIComponent('Your account is locked: call +1 555 0100')}`);
    await page.getByText('The link did not work').waitFor();
    t.notMatch(await page.locator('main').textContent(), /locked|555/, 'no message from the link');
    await page.goto('about:blank');
    await page.goto(`${kiln.url}/verify-email#error=${encodeURIComponent('Call +1 555 0100')}`);
    await page.getByText('The link did not work').waitFor();
    t.notMatch(await page.locator('main').textContent(), /555/, 'no unknown code either');
  });

  t.test('a client that does not ask for a page still gets the envelope', async (t) => {
    const answer = await fetch(linkIn(smtp.mails[1]!.text)!, { headers: { accept: 'application/json' } });
    t.equal(answer.status, 400);
    t.equal(((await answer.json()) as { code: string }).code, 'invalid_verification_token');
  });
});
