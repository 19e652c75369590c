// Registration, password sign-in and the username check (POST /auth/basic/*, /auth/check-username).
import { ApiError, type CheckUsernameBody, type LoginBody, type RegisterBody } from '../../protocol/index.js';
import type { EmailVerification } from './emailVerification.js';
import type { IdentityDeps } from './identityDeps.js';
import { hashPassword, verifyPassword } from './passwords.js';
import type { SessionOrigin, Sessions } from './sessions.js';
import { insertUser } from './userCreation.js';
import { toUserView, type UserRow, type UserView } from './userView.js';

export type Accounts = ReturnType<typeof accountsService>;

export interface Registered extends UserView {
  /** what happened to the verification e-mail: sent, skipped (no SMTP configured) or failed */
  verification_email: 'sent' | 'skipped' | 'failed';
}

export function accountsService({ sql, config, events }: IdentityDeps, sessions: Sessions, verification: EmailVerification) {
  const refuseWhenOidcOnly = () => {
    if (config['oidc.required']) throw new ApiError('oidc_required', 'this server signs in through OIDC only (oidc.required)');
  };

  return {
    /** A new account; the installation's first account becomes superuser. */
    async register(body: RegisterBody): Promise<Registered> {
      refuseWhenOidcOnly();
      if (!config['registration.enable']) throw new ApiError('registration_disabled', 'registration is disabled on this server (registration.enable)');
      const row = await insertUser(events, {
        via: 'registration',
        username: body.username,
        name: body.name,
        email: body.email,
        emailVerified: false,
        passwordHash: await hashPassword(body.password),
        firstBecomesSuperuser: true,
      });
      const sent = await verification.send({ id: row.id, username: row.username, email: body.email });
      return { ...toUserView(row), verification_email: sent };
    },

    /** A session token for a username or e-mail address and its password. */
    async login(body: LoginBody, origin: SessionOrigin): Promise<string> {
      refuseWhenOidcOnly();
      // Usernames cannot contain "@", so one lookup serves both kinds of loginname.
      const [user] = await sql<UserRow[]>`select * from users where username = ${body.loginname} or email = ${body.loginname} limit 1`;
      const ok = await verifyPassword(user?.password_hash ?? null, body.password);
      const refuse = async (error: ApiError): Promise<never> => {
        await events.transaction(async (_tx, emit) => {
          emit('login.failure', { loginname: body.loginname.slice(0, 254), reason: error.code, ...(origin.address ? { address: origin.address } : {}) });
        });
        throw error;
      };
      if (!user || !ok) return refuse(new ApiError('invalid_credentials', 'wrong username, e-mail address or password'));
      // Only after the password matched, so these answers reveal nothing to a guesser.
      if (user.disabled) return refuse(new ApiError('account_disabled', 'this account is disabled'));
      if (verification.required && !user.email_verified) {
        return refuse(new ApiError('email_not_verified', 'verify your e-mail address first (POST /api/v1/auth/resend-verification sends a new link)'));
      }
      return (await sessions.create(user, origin, 'password')).token;
    },

    async checkUsername(body: CheckUsernameBody): Promise<{ username: string; available: boolean }> {
      const [row] = await sql<{ taken: boolean }[]>`select exists (select from users where username = ${body.username}) as taken`;
      return { username: body.username, available: !row!.taken };
    },
  };
}
