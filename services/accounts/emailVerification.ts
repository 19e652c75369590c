// E-mail verification: tokens sent by mail, their lifetime and their redemption.
import { createHash, randomBytes } from 'node:crypto';
import { ApiError } from '../../protocol/index.js';
import type { IdentityDeps } from './identityDeps.js';
import type { Mailer } from './mailer.js';

/** A verification link works for 48 hours; a new one can be asked for with resend-verification. */
export const VERIFICATION_LIFETIME_MS = 48 * 60 * 60 * 1000;

const hashToken = (token: string) => createHash('sha256').update(token).digest('hex');

export interface VerificationTarget {
  id: string;
  username: string;
  email: string;
}

export type EmailVerification = ReturnType<typeof emailVerificationService>;

export function emailVerificationService({ sql, config, log, clock }: IdentityDeps, mailer: Mailer) {
  if (config['email.requireVerification'] && !mailer.configured) {
    log.warn('email.requireVerification is set but e-mail is not sent (email.enable or email.smtp.host): verification is not enforced');
  }
  const link = (token: string) => `${config['serveUrl'].replace(/\/$/, '')}/api/v1/auth/verify-email?token=${token}`;

  /**
   * Sends a link to the user's address. A failing SMTP server is logged, not thrown: the account
   * exists either way, and the user can ask again.
   */
  async function send(user: VerificationTarget): Promise<'sent' | 'skipped' | 'failed'> {
    if (!mailer.configured) return 'skipped';
    const token = randomBytes(32).toString('base64url');
    const now = clock.now();
    await sql`
      insert into email_verifications (token_hash, user_id, email, created_at, expires_at)
      values (${hashToken(token)}, ${user.id}, ${user.email}, ${now}, ${new Date(now.getTime() + VERIFICATION_LIFETIME_MS)})`;
    try {
      return await mailer.send({
        to: user.email,
        subject: 'Verify your e-mail address',
        text:
          `Hello ${user.username},\n\nplease confirm that this is your e-mail address by opening this link ` +
          `within 48 hours:\n\n${link(token)}\n\nIf you did not create an account, ignore this message.\n`,
      });
    } catch (e) {
      log.warn({ err: e, user: user.username }, 'could not send the verification e-mail');
      return 'failed';
    }
  }

  return {
    send,

    /**
     * Password sign-in needs a verified address (email.enable and email.requireVerification), as
     * long as links can be sent at all: without an SMTP server nobody could ever verify.
     */
    required: config['email.requireVerification'] && mailer.configured,

    /** Marks the address verified; the link is used up, and so are the user's other links. */
    async verify(token: string): Promise<{ username: string; email: string }> {
      const [row] = await sql<{ user_id: string; email: string; expires_at: Date }[]>`
        delete from email_verifications where token_hash = ${hashToken(token)} returning user_id, email, expires_at`;
      if (!row) throw new ApiError('invalid_verification_token', 'this verification link is not valid (it may have been used already)');
      if (row.expires_at <= clock.now()) throw new ApiError('verification_expired', 'this verification link has expired; ask for a new one');
      const [user] = await sql<{ username: string; email: string }[]>`
        update users set email_verified = true, updated_at = now()
        where id = ${row.user_id} and email = ${row.email}
        returning username, email`;
      if (!user) throw new ApiError('invalid_verification_token', 'the account\'s e-mail address changed since this link was sent');
      await sql`delete from email_verifications where user_id = ${row.user_id}`;
      return user;
    },

    /** Sends a new link when an unverified account has this address; otherwise does nothing, saying the same. */
    async resend(email: string): Promise<void> {
      const [user] = await sql<VerificationTarget[]>`
        select id, username, email from users where email = ${email} and not email_verified and not disabled`;
      if (user) await send(user);
    },
  };
}
