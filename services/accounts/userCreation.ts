// Inserting a user, shared by registration, OIDC's first sign-in and SCIM.
import { ApiError } from '../../protocol/index.js';
import type { Events } from '../../storage/index.js';
import type { UserRow } from './userView.js';

export interface NewUser {
  username: string;
  name: string;
  email: string | null;
  emailVerified: boolean;
  passwordHash: string | null;
  oidcSubject?: string | null;
  scimExternalId?: string | null;
  /** the first account of an installation becomes superuser (registration and OIDC; not SCIM) */
  firstBecomesSuperuser: boolean;
  /** how it came: user.create names it */
  via: 'registration' | 'oidc' | 'scim';
}

interface PgError {
  code?: string;
  constraint_name?: string;
}

/** Turns a unique violation on users into the 409 a client can act on. */
export function userConflict(e: unknown, username: string, email: string | null): ApiError | null {
  const pg = e as PgError;
  if (pg?.code !== '23505') return null;
  if (pg.constraint_name === 'users_email_key') return new ApiError('email_taken', `an account with the e-mail address ${email} exists`);
  if (pg.constraint_name === 'users_oidc_subject_key') return new ApiError('oidc_subject_taken', 'another account is linked to this OIDC identity');
  return new ApiError('username_taken', `the username "${username}" is taken`);
}

/** Inserts the account and emits user.create in the same transaction. */
export async function insertUser(events: Events, user: NewUser): Promise<UserRow> {
  try {
    return await events.transaction(async (tx, emit) => {
      let superuser = false;
      if (user.firstBecomesSuperuser) {
        // Two first registrations at once must not both become superuser: the check runs under a lock.
        await tx`select pg_advisory_xact_lock(hashtextextended('kiln.first-user', 0))`;
        const [any] = await tx<{ exists: boolean }[]>`select exists (select from users) as exists`;
        superuser = !any!.exists;
      }
      const [row] = await tx<UserRow[]>`
        insert into users (username, name, email, email_verified, password_hash, oidc_subject, scim_external_id, superuser)
        values (${user.username}, ${user.name}, ${user.email}, ${user.emailVerified}, ${user.passwordHash},
                ${user.oidcSubject ?? null}, ${user.scimExternalId ?? null}, ${superuser})
        returning *`;
      emit('user.create', { user: row!.username, user_id: row!.id, via: user.via, ...(superuser ? { superuser } : {}) }, { userId: row!.id });
      return row!;
    });
  } catch (e) {
    throw userConflict(e, user.username, user.email) ?? e;
  }
}
