// Settings → SSH keys in real Chromium against a real kiln serve: a key made by the real OpenSSH
// ssh-keygen is added (its fingerprint as ssh-keygen prints it), a malformed one and a duplicate are
// refused with the API's message, another user never sees it, and deleting asks first.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import t, { type Test } from 'tap';
import { UserSshKeyView } from '../../protocol/api/sshKeys.js';
import { signUp, type TestAccount } from '../support/accounts.js';
import { launchBrowser, openPage, screenshot, seriousAccessibilityViolations } from '../support/browser.js';
import { startTestKiln, type TestKiln } from '../support/kiln.js';
import { tempDir } from '../support/nixStore.js';

/** A page signed in as `who` (the session token where the sign-in page puts it), on Settings. */
async function settingsAs(t: Test, browser: Awaited<ReturnType<typeof launchBrowser>>, kiln: TestKiln, who: TestAccount): Promise<{ page: Page; problems: string[] }> {
  const opened = await openPage(t, browser);
  await opened.context.addInitScript({ content: `sessionStorage.setItem('kiln.session', ${JSON.stringify(who.token)});` });
  await opened.page.goto(kiln.url + '/settings');
  await opened.page.getByRole('heading', { name: 'SSH keys' }).waitFor();
  return opened;
}

async function listed(t: Test, kiln: TestKiln, who: TestAccount): Promise<UserSshKeyView[]> {
  const res = await kiln.api('GET', '/user/ssh-keys', { token: who.token });
  t.equal(res.status, 200);
  return UserSshKeyView.array().parse(res.message);
}

t.test('SSH keys on the Settings page', async (t) => {
  const kiln = await startTestKiln(t);
  const browser = await launchBrowser(t);
  await signUp(kiln, 'root');
  const ada = await signUp(kiln, 'ada');
  const bea = await signUp(kiln, 'bea');
  const dir = tempDir('kiln-ssh-keys-');
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'ada@laptop', '-f', join(dir, 'id_ed25519')]);
  const publicLine = readFileSync(join(dir, 'id_ed25519.pub'), 'utf8').trim();
  // "256 SHA256:… ada@laptop (ED25519)"
  const fingerprint = execFileSync('ssh-keygen', ['-l', '-f', join(dir, 'id_ed25519.pub')], { encoding: 'utf8' }).split(' ')[1]!;
  const { page, problems } = await settingsAs(t, browser, kiln, ada);
  const keys = page.getByTestId('ssh-keys');
  const form = page.getByRole('form', { name: 'Add an SSH key' });

  t.test('none yet; a malformed key is refused under its field', async (t) => {
    await page.getByText('No SSH keys.').waitFor();
    await form.getByLabel('SSH key name').fill('laptop');
    await form.getByLabel(/^Public key/).fill('ssh-ed25519 not-base64 ada@laptop');
    await page.getByRole('button', { name: 'Add SSH key' }).click();
    const error = page.locator('#ssh-key-public-error');
    await error.waitFor();
    t.match(await error.textContent(), /^public_key: /, "the API's message under the public key");
    t.equal(await form.getByLabel(/^Public key/).getAttribute('aria-invalid'), 'true');
    t.same(await listed(t, kiln, ada), [], 'nothing stored');
  });

  t.test("added: listed with ssh-keygen's fingerprint; a second copy is refused", async (t) => {
    await form.getByLabel(/^Public key/).fill(publicLine);
    await page.getByRole('button', { name: 'Add SSH key' }).click();
    await keys.getByRole('cell', { name: 'laptop', exact: true }).waitFor();
    t.equal(await keys.getByRole('cell', { name: fingerprint }).count(), 1, 'the fingerprint ssh-keygen prints');
    t.equal(await page.locator('#ssh-key-public-error').count(), 0, 'the old error is gone');
    const [stored] = await listed(t, kiln, ada);
    t.match(stored, { name: 'laptop', type: 'ssh-ed25519', fingerprint, public_key: publicLine.split(' ').slice(0, 2).join(' '), last_used_at: null });

    await form.getByLabel('SSH key name').fill('again');
    await form.getByLabel(/^Public key/).fill(publicLine);
    await page.getByRole('button', { name: 'Add SSH key' }).click();
    await page.getByRole('alert').filter({ hasText: /registered already/ }).waitFor();
    t.equal((await listed(t, kiln, ada)).length, 1, 'still one key');
    t.same(await listed(t, kiln, bea), [], "bea's list does not hold ada's key");
    t.same(await seriousAccessibilityViolations(page), [], 'settings with SSH keys: no serious or critical axe violations');
    await page.getByRole('heading', { name: 'SSH keys' }).scrollIntoViewIfNeeded();
    await screenshot(page, 'settings-ssh-keys');
  });

  t.test('another user sees none of it', async (t) => {
    const other = await settingsAs(t, browser, kiln, bea);
    await other.page.getByText('No SSH keys.').waitFor();
    t.notOk((await other.page.content()).includes(fingerprint), "ada's fingerprint is nowhere on bea's page");
  });

  t.test('deleted only after confirming', async (t) => {
    await page.getByRole('button', { name: 'Delete SSH key laptop' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByText(/Delete the SSH key “laptop”/).waitFor();
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    t.equal((await listed(t, kiln, ada)).length, 1, 'cancel keeps it');
    await page.getByRole('button', { name: 'Delete SSH key laptop' }).click();
    await dialog.getByRole('button', { name: 'Delete', exact: true }).click();
    await page.getByText('No SSH keys.').waitFor();
    await page.getByRole('status').filter({ hasText: 'SSH key "laptop" deleted' }).waitFor();
    t.same(await listed(t, kiln, ada), []);
  });

  t.test('no console errors or CSP violations on the way but the refusals', async (t) => {
    t.same(problems.filter((p) => !/status of (400|409)/.test(p)), []);
  });
});
