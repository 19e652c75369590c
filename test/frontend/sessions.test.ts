// Settings → Sessions in real Chromium against a real kiln serve: the user's sessions with where
// and when each signed in (this browser marked), none of another user's; revoking another session
// asks first and kills its token; revoking this browser's signs out to the sign-in page.
import type { Page } from 'playwright-core';
import t, { type Test } from 'tap';
import { z } from 'zod';
import { UserSessionView } from '../../protocol/api/userSessions.js';
import { freshAddress, signUp, type TestAccount } from '../support/accounts.js';
import { launchBrowser, openPage, screenshot, seriousAccessibilityViolations } from '../support/browser.js';
import { startTestKiln, type TestKiln } from '../support/kiln.js';

/** A page signed in with `token` (where the sign-in page puts it), on Settings. */
async function settingsWith(t: Test, browser: Awaited<ReturnType<typeof launchBrowser>>, kiln: TestKiln, token: string): Promise<{ page: Page; problems: string[] }> {
  const opened = await openPage(t, browser);
  await opened.context.addInitScript({ content: `sessionStorage.setItem('kiln.session', ${JSON.stringify(token)});` });
  await opened.page.goto(kiln.url + '/settings');
  await opened.page.getByTestId('sessions').waitFor();
  return opened;
}

async function sessionsOf(t: Test, kiln: TestKiln, who: TestAccount): Promise<UserSessionView[]> {
  const res = await kiln.api('GET', '/user/sessions', { token: who.token });
  t.equal(res.status, 200);
  return z.array(UserSessionView).parse(res.message);
}

t.test('Sessions on the Settings page', async (t) => {
  const kiln = await startTestKiln(t);
  const browser = await launchBrowser(t);
  await signUp(kiln, 'root');
  const ada = await signUp(kiln, 'ada');
  const bea = await signUp(kiln, 'bea');
  // a second sign-in of ada's, from a "phone" at its own address
  const phoneAddress = freshAddress();
  const phone = await kiln.api<string>('POST', '/auth/basic/login', {
    body: { loginname: 'ada', password: ada.password }, headers: { ...phoneAddress, 'user-agent': 'PhoneBrowser/1.0' },
  });
  t.equal(phone.status, 200);
  const browserLogin = await kiln.api<string>('POST', '/auth/basic/login', { body: { loginname: 'ada', password: ada.password }, headers: freshAddress() });
  const { page, problems } = await settingsWith(t, browser, kiln, browserLogin.message);
  const table = page.getByTestId('sessions');

  t.test("ada's three sessions, this browser marked, none of bea's", async (t) => {
    await table.getByText('PhoneBrowser/1.0').waitFor();
    t.equal(await table.locator('tbody tr').count(), 3, "sign-up's, the phone's and this browser's");
    t.equal(await table.getByText(phoneAddress['x-forwarded-for']!, { exact: true }).count(), 1, "the phone's address");
    const current = table.locator('tr[data-current]');
    t.equal(await current.count(), 1, 'one row is this browser');
    t.match(await current.textContent(), /this browser/);
    t.equal(await table.getByText('not since sign-in').count(), 2, 'the other two made no request since signing in');
    const beas = await sessionsOf(t, kiln, bea);
    for (const s of beas) t.equal(await page.locator(`text=${s.id}`).count(), 0);
    t.same(await seriousAccessibilityViolations(page), [], 'settings with sessions: no serious or critical axe violations');
    await page.getByRole('heading', { name: 'Sessions' }).scrollIntoViewIfNeeded();
    await screenshot(page, 'settings-sessions');
  });

  t.test("bea's page lists only bea's session", async (t) => {
    const other = await settingsWith(t, browser, kiln, bea.token);
    await other.page.getByTestId('sessions').locator('tbody tr').first().waitFor();
    t.equal(await other.page.getByTestId('sessions').locator('tbody tr').count(), 1);
    t.equal(await other.page.getByText('PhoneBrowser/1.0').count(), 0, "ada's phone is nowhere on bea's page");
  });

  t.test("revoking the phone's session asks first, then its token is dead", async (t) => {
    const phoneButton = page.getByRole('button', { name: new RegExp(`^Revoke session from ${phoneAddress['x-forwarded-for']!.replace(/\./g, '\\.')}`) });
    await phoneButton.click();
    const dialog = page.getByRole('dialog');
    await dialog.getByText(/Revoke this session\?/).waitFor();
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    t.equal((await kiln.api('GET', '/user', { token: phone.message })).status, 200, 'cancel keeps it');
    await phoneButton.click();
    await dialog.getByRole('button', { name: 'Revoke', exact: true }).click();
    await page.getByRole('status').filter({ hasText: 'session revoked' }).waitFor();
    await table.getByText('PhoneBrowser/1.0').waitFor({ state: 'detached' });
    t.equal(await table.locator('tbody tr').count(), 2);
    t.equal((await kiln.api('GET', '/user', { token: phone.message })).status, 401, "the phone's token is refused");
  });

  t.test("revoking this browser's session signs out", async (t) => {
    await page.getByRole('button', { name: "Revoke this browser's session" }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Sign out', exact: true }).click();
    await page.waitForURL(/\/login/);
    t.equal((await kiln.api('GET', '/user', { token: browserLogin.message })).status, 401, "this browser's token is refused");
    t.same((await sessionsOf(t, kiln, ada)).length, 1, "only the sign-up's session is left");
  });

  t.test('no console errors or CSP violations on the way', async (t) => {
    t.same(problems.filter((p) => !/status of 401/.test(p)), []);
  });
});
