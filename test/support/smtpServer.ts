// A real SMTP server on loopback (the smtp-server package) that keeps what it receives.
import { SMTPServer } from 'smtp-server';
import type { Test } from 'tap';
import { freePort } from './kiln.js';

export interface ReceivedMail {
  from: string;
  to: string[];
  /** the message as sent, quoted-printable soft breaks and escapes undone */
  text: string;
}

export interface TestSmtp {
  port: number;
  mails: ReceivedMail[];
}

/** Undoes quoted-printable (nodemailer wraps long lines such as links). */
const unquote = (raw: string) => raw.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));

export async function startSmtpServer(t: Pick<Test, 'teardown'>, auth?: { user: string; pass: string }): Promise<TestSmtp> {
  const mails: ReceivedMail[] = [];
  const server = new SMTPServer({
    disabledCommands: auth ? ['STARTTLS'] : ['STARTTLS', 'AUTH'],
    authOptional: !auth,
    allowInsecureAuth: true,
    logger: false,
    onAuth(credentials, _session, callback) {
      if (auth && credentials.username === auth.user && credentials.password === auth.pass) callback(null, { user: auth.user });
      else callback(new Error('invalid SMTP credentials'));
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        mails.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          text: unquote(Buffer.concat(chunks).toString('utf8')),
        });
        callback();
      });
    },
  });
  const port = await freePort();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { port, mails };
}
