// A failed load of nodemailer is not kept: the next message loads it again instead of failing the
// same way until the process restarts (services/accounts/mailer.ts). A real SMTP server on loopback.
import t from 'tap';
import pino from 'pino';
import { createMailer, type NodemailerLoader } from '../../../services/accounts/mailer.js';
import { startSmtpServer } from '../../support/smtpServer.js';

t.test('a failed nodemailer load is tried again at the next message', async (t) => {
  const smtp = await startSmtpServer(t);
  let loads = 0;
  const load: NodemailerLoader = async () => {
    loads++;
    if (loads === 1) throw new Error('Cannot find package \'nodemailer\' (a half-finished upgrade)');
    return (await import('nodemailer')).default;
  };
  const mailer = createMailer({
    'email.enable': true, 'email.from.address': 'kiln@example.test', 'email.from.name': 'kiln', 'email.smtp.host': '127.0.0.1',
    'email.smtp.port': smtp.port, 'email.smtp.useTls': false, 'email.smtp.username': null, 'email.smtp.passwordFile': null, serveUrl: 'http://kiln.example.test',
  }, pino({ level: 'silent' }), load);
  t.teardown(() => mailer.close());
  const mail = { to: 'ada@example.test', subject: 'hello', text: 'the first try fails to load' };
  await t.rejects(mailer.send(mail), /did not take a message: Cannot find package/);
  t.equal(await mailer.send(mail), 'sent', 'the next message loads nodemailer again');
  t.equal(loads, 2);
  t.equal(await mailer.send(mail), 'sent');
  t.equal(loads, 2, 'a transport that loaded is kept');
  t.same(smtp.mails.map((m) => m.to), [['ada@example.test'], ['ada@example.test']]);
});
