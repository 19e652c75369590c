// Outgoing e-mail over SMTP. With email.enable off or no email.smtp.host, every message is skipped
// without error (configuration.md: "when no SMTP server is configured every notification is skipped").
import type { Transporter } from 'nodemailer';
import type SMTPTransport from 'nodemailer/lib/smtp-transport/index.js';
import { readSecretFile, type Config, type Logger } from '../../config/index.js';

export interface Mail {
  to: string;
  subject: string;
  text: string;
}

export interface Mailer {
  /** whether messages are really sent */
  readonly configured: boolean;
  /** 'skipped' when not configured; throws when the SMTP server refuses or cannot be reached */
  send(mail: Mail): Promise<'sent' | 'skipped'>;
  close(): void;
}

type MailConfig = Pick<
  Config,
  | 'email.enable' | 'email.from.address' | 'email.from.name' | 'email.smtp.host' | 'email.smtp.port'
  | 'email.smtp.useTls' | 'email.smtp.username' | 'email.smtp.passwordFile' | 'serveUrl'
>;

/** Port 465 speaks TLS from the first byte; other ports start plain and must upgrade with STARTTLS. */
function transportOptions(config: MailConfig): SMTPTransport.Options {
  const port = config['email.smtp.port'];
  const tls = config['email.smtp.useTls'];
  const user = config['email.smtp.username'];
  const passwordFile = config['email.smtp.passwordFile'];
  return {
    host: config['email.smtp.host']!,
    port,
    secure: tls && port === 465,
    requireTLS: tls && port !== 465,
    // Without useTls a server's STARTTLS offer is ignored rather than tried with an unverifiable certificate.
    ignoreTLS: !tls,
    ...(user ? { auth: { user, pass: passwordFile ? readSecretFile(passwordFile) : '' } } : {}),
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 20_000,
  };
}

type Nodemailer = Pick<typeof import('nodemailer'), 'createTransport'>;
/** Loads nodemailer; a test injects a loader that fails. */
export type NodemailerLoader = () => Promise<Nodemailer>;
const loadNodemailer: NodemailerLoader = async () => (await import('nodemailer')).default;

export function createMailer(config: MailConfig, log: Logger, load: NodemailerLoader = loadNodemailer): Mailer {
  const configured = config['email.enable'] && config['email.smtp.host'] !== null;
  if (config['email.enable'] && !configured) log.info('email.enable is set but email.smtp.host is not: e-mail notifications are skipped');
  // The options (and the password file) are read now, so a wrong file fails at start; nodemailer
  // itself is loaded at the first message (~11 MiB a process that sends none would carry).
  const options = configured ? transportOptions(config) : null;
  let transport: Promise<Transporter<SMTPTransport.SentMessageInfo>> | null = null;
  const from = {
    name: config['email.from.name'],
    address: config['email.from.address'] ?? `kiln@${new URL(config['serveUrl']).hostname}`,
  };
  return {
    configured,
    async send(mail) {
      if (!options) return 'skipped';
      if (transport === null) {
        const loading = load().then((nodemailer) => nodemailer.createTransport(options));
        transport = loading;
        // a load that failed is not kept: the next message tries again instead of failing the same way until a restart
        loading.catch(() => { if (transport === loading) transport = null; });
      }
      try {
        await (await transport).sendMail({ from, to: mail.to, subject: mail.subject, text: mail.text });
      } catch (cause) {
        throw new Error(`the SMTP server ${config['email.smtp.host']}:${config['email.smtp.port']} did not take a message: ${(cause as Error).message}`, { cause });
      }
      return 'sent';
    },
    close() {
      void transport?.then((t) => t.close(), () => undefined);
    },
  };
}
