import t, { type Test } from 'tap';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, startTestKiln } from '../../../support/kiln.js';
import { freshAddress, registerUser } from '../../../support/accounts.js';
import { startSmtpServer } from '../../../support/smtpServer.js';

const linkIn = (text: string) => /(http:\/\/\S+\/api\/v1\/auth\/verify-email\?token=[\w-]+)/.exec(text)?.[1];

async function passwordFile(t: Test, text: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'kiln-smtp-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'password'), `${text}\n`);
  return join(dir, 'password');
}

t.test('verification over a real SMTP server, required for password sign-in', async (t) => {
  const smtp = await startSmtpServer(t, { user: 'kiln-mailer', pass: 'smtp secret' });
  const kiln = await startTestKiln(t, {
    'email.enable': true, 'email.requireVerification': true,
    'email.smtp.host': '127.0.0.1', 'email.smtp.port': smtp.port, 'email.smtp.useTls': false,
    'email.smtp.username': 'kiln-mailer', 'email.smtp.passwordFile': await passwordFile(t, 'smtp secret'),
    'email.from.address': 'kiln@example.test', 'email.from.name': 'Kiln Test',
  });
  const reg = await kiln.api<{ verification_email: string; email_verified: boolean }>('POST', '/auth/basic/register', {
    body: { username: 'ada', email: 'ada@example.test', password: 'long enough' }, headers: freshAddress(),
  });
  t.match(reg.message, { verification_email: 'sent', email_verified: false });
  t.equal(smtp.mails.length, 1);
  t.same(smtp.mails[0]!.to, ['ada@example.test']);
  t.equal(smtp.mails[0]!.from, 'kiln@example.test');
  t.match(smtp.mails[0]!.text, /From: Kiln Test <kiln@example\.test>/);
  const link = linkIn(smtp.mails[0]!.text);
  t.ok(link?.startsWith(`${kiln.url}/api/v1/auth/verify-email?token=`), 'the link uses serveUrl');

  const signIn = () => kiln.api('POST', '/auth/basic/login', { body: { loginname: 'ada', password: 'long enough' }, headers: freshAddress() });
  const refused = await signIn();
  t.same([refused.status, refused.code], [403, 'email_not_verified']);

  const resend = await kiln.api<string>('POST', '/auth/resend-verification', { body: { email: 'ada@example.test' }, headers: freshAddress() });
  t.equal(resend.status, 200);
  t.equal(smtp.mails.length, 2, 'a second link');
  const unknown = await kiln.api<string>('POST', '/auth/resend-verification', { body: { email: 'nobody@example.test' }, headers: freshAddress() });
  t.same([unknown.status, unknown.message], [200, resend.message], 'an unknown address gets the same answer');
  t.equal(smtp.mails.length, 2, 'and no mail');

  const bad = await kiln.api('GET', '/auth/verify-email?token=nonsense');
  t.same([bad.status, bad.code], [400, 'invalid_verification_token']);
  t.same((await kiln.api('GET', '/auth/verify-email')).code, 'invalid_query');

  const verified = await fetch(link!);
  t.equal(verified.status, 200);
  t.match(((await verified.json()) as { message: string }).message, /ada@example\.test/);
  const [row] = await kiln.sql<{ email_verified: boolean }[]>`select email_verified from users`;
  t.equal(row!.email_verified, true);
  t.equal((await fetch(link!)).status, 400, 'a link works once');
  t.equal((await fetch(linkIn(smtp.mails[1]!.text)!)).status, 400, "verifying uses up the user's other links");
  t.equal((await signIn()).status, 200, 'a verified account signs in');

  await kiln.api('POST', '/auth/resend-verification', { body: { email: 'ada@example.test' }, headers: freshAddress() });
  t.equal(smtp.mails.length, 2, 'no link for a verified address');
  const noEmail = await kiln.api('POST', '/auth/resend-verification', { body: { email: 'ada' }, headers: freshAddress() });
  t.same([noEmail.status, noEmail.code], [400, 'invalid_body']);
  t.match(noEmail.message, /^email: /);
  t.match((await kiln.api('POST', '/auth/resend-verification', { body: {}, headers: freshAddress() })).message, /^email: /);

  await registerUser(kiln, 'bob');
  await kiln.sql`update email_verifications set expires_at = now() - interval '1 second'`;
  const expired = await fetch(linkIn(smtp.mails[2]!.text)!);
  t.equal(expired.status, 410);
  t.equal(((await expired.json()) as { code: string }).code, 'verification_expired');
});

t.test('a new e-mail address in the settings is sent a link', async (t) => {
  const smtp = await startSmtpServer(t);
  const kiln = await startTestKiln(t, {
    'email.enable': true, 'email.smtp.host': '127.0.0.1', 'email.smtp.port': smtp.port, 'email.smtp.useTls': false,
    'email.from.address': 'kiln@example.test',
  });
  const ada = await registerUser(kiln, 'ada');
  const token = (await kiln.api<string>('POST', '/auth/basic/login', { body: { loginname: 'ada', password: ada.password }, headers: freshAddress() })).message;
  t.equal(smtp.mails.length, 1);
  await kiln.api('PATCH', '/user/settings', { token, body: { email: 'countess@example.test' } });
  t.same(smtp.mails[1]!.to, ['countess@example.test']);
  t.equal((await fetch(linkIn(smtp.mails[0]!.text)!)).status, 400, 'the link to the old address no longer verifies');
  t.equal((await fetch(linkIn(smtp.mails[1]!.text)!)).status, 200);
});

t.test('without an SMTP server, notifications are skipped without error', async (t) => {
  const kiln = await startTestKiln(t, { 'email.enable': true, 'email.requireVerification': true });
  const reg = await kiln.api<{ verification_email: string }>('POST', '/auth/basic/register', {
    body: { username: 'ada', email: 'ada@example.test', password: 'long enough' }, headers: freshAddress(),
  });
  t.same([reg.status, reg.message.verification_email], [200, 'skipped']);
  t.equal((await kiln.api('POST', '/auth/resend-verification', { body: { email: 'ada@example.test' }, headers: freshAddress() })).status, 200);
  const login = await kiln.api('POST', '/auth/basic/login', { body: { loginname: 'ada', password: 'long enough' }, headers: freshAddress() });
  t.equal(login.status, 200, 'verification cannot be required when no link can be sent');
});

t.test('an SMTP server that does not answer does not fail registration', async (t) => {
  const kiln = await startTestKiln(t, {
    'email.enable': true, 'email.smtp.host': '127.0.0.1', 'email.smtp.port': await freePort(), 'email.smtp.useTls': false,
    'email.from.address': 'kiln@example.test',
  });
  const reg = await kiln.api<{ verification_email: string }>('POST', '/auth/basic/register', {
    body: { username: 'ada', email: 'ada@example.test', password: 'long enough' }, headers: freshAddress(),
  });
  t.same([reg.status, reg.message.verification_email], [200, 'failed']);
  t.equal((await kiln.sql`select 1 from users`).length, 1);
});
