// Which kiln account an OIDC identity signs in as: the one linked to its subject; else the account
// with its e-mail address, when the provider vouches for that address (email_verified), which is
// then linked; else a new account. Linking by an unverified address would let anyone who can
// claim an address at the provider take over the kiln account that has it.
import { ApiError } from '../../protocol/index.js';
import type { Events, Sql } from '../../storage/index.js';
import { insertUser } from './userCreation.js';
import type { UserRow } from './userView.js';

export interface OidcIdentity {
  subject: string;
  email: string | null;
  emailVerified: boolean;
  preferredUsername: string | null;
  name: string | null;
}

/** A username of the users table's pattern, from what the provider offers. */
export function usernameCandidate(identity: OidcIdentity): string {
  const raw = identity.preferredUsername ?? identity.email?.split('@')[0] ?? 'user';
  const cleaned = raw.replace(/[^A-Za-z0-9_.-]+/g, '-').replace(/^[^A-Za-z0-9]+/, '').slice(0, 56);
  return cleaned === '' ? 'user' : cleaned;
}

export async function findOrCreateOidcUser(sql: Sql, events: Events, identity: OidcIdentity): Promise<UserRow> {
  const [linked] = await sql<UserRow[]>`select * from users where oidc_subject = ${identity.subject}`;
  if (linked) return linked;
  if (identity.email !== null) {
    const [byEmail] = await sql<UserRow[]>`select * from users where email = ${identity.email}`;
    if (byEmail && identity.emailVerified) {
      if (byEmail.oidc_subject !== null) throw new ApiError('oidc_subject_taken', `the account with ${identity.email} is linked to another OIDC identity`);
      const row = await events.transaction(async (tx, emit) => {
        const [linked] = await tx<UserRow[]>`
          update users set oidc_subject = ${identity.subject}, email_verified = true, updated_at = now()
          where id = ${byEmail.id} and oidc_subject is null returning *`;
        if (linked) emit('user.update', { user: linked.username, user_id: linked.id, via: 'oidc', changes: ['oidc_subject'] }, { userId: linked.id });
        return linked;
      });
      if (row) return row;
    }
    // An unverified claim to a taken address: a new account, without that address.
    if (byEmail) identity = { ...identity, email: null };
  }
  const base = usernameCandidate(identity);
  for (let attempt = 1; ; attempt++) {
    const username = attempt === 1 ? base : `${base}-${attempt}`;
    try {
      return await insertUser(events, {
        via: 'oidc',
        username,
        name: identity.name?.slice(0, 200) ?? '',
        email: identity.email,
        emailVerified: identity.email !== null && identity.emailVerified,
        passwordHash: null,
        oidcSubject: identity.subject,
        firstBecomesSuperuser: true,
      });
    } catch (e) {
      // Another sign-in of the same subject won the race: use its account.
      if (e instanceof ApiError && e.code === 'oidc_subject_taken') {
        const [row] = await sql<UserRow[]>`select * from users where oidc_subject = ${identity.subject}`;
        if (row) return row;
      }
      if (!(e instanceof ApiError && e.code === 'username_taken') || attempt >= 50) throw e;
    }
  }
}
