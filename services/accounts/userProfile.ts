// The signed-in account: GET/DELETE /user and GET/PATCH /user/settings.
import { ApiError, type SettingsPatch } from '../../protocol/index.js';
import type { EmailVerification } from './emailVerification.js';
import type { IdentityDeps } from './identityDeps.js';
import { hashPassword, verifyPassword } from './passwords.js';
import type { Principal } from '../access/index.js';
import { requireSession, requireUser } from '../access/index.js';
import type { Sessions } from './sessions.js';
import { userConflict } from './userCreation.js';
import { toUserView, type UserRow, type UserView } from './userView.js';

export interface UserSettings {
  username: string;
  name: string;
  email: string | null;
  email_verified: boolean;
  has_password: boolean;
  preferences: Record<string, unknown>;
}

const toSettings = (row: UserRow): UserSettings => ({
  username: row.username,
  name: row.name,
  email: row.email,
  email_verified: row.email_verified,
  has_password: row.password_hash !== null,
  preferences: row.settings,
});

export type UserProfile = ReturnType<typeof userProfileService>;

export function userProfileService({ sql, events }: IdentityDeps, sessions: Sessions, verification: EmailVerification) {
  const load = async (userId: string): Promise<UserRow> => {
    const [row] = await sql<UserRow[]>`select * from users where id = ${userId}`;
    // The authenticator found the account a moment ago; it was deleted in between.
    if (!row) throw new ApiError('invalid_token', 'the account behind this token no longer exists');
    return row;
  };

  return {
    async get(who: Principal): Promise<UserView> {
      return toUserView(await load(requireUser(who).userId));
    },

    /** Deletes the account with its sessions, keys, memberships and invitations (a session only). */
    async delete(who: Principal): Promise<string> {
      const user = requireSession(who, 'deleting the account');
      const row = await load(user.userId);
      if (row.state_managed) throw new ApiError('state_managed', `the account "${row.username}" is declared in the state file; remove it there`);
      await events.transaction(async (tx, emit) => {
        await tx`delete from users where id = ${user.userId}`;
        emit('user.delete', { user: row.username, user_id: row.id }, { userId: row.id });
      });
      return `account "${row.username}" deleted`;
    },

    async getSettings(who: Principal): Promise<UserSettings> {
      return toSettings(await load(requireUser(who).userId));
    },

    /** Changes the profile; a new password logs out every other session, a new e-mail needs verifying again. */
    async patchSettings(who: Principal, patch: SettingsPatch): Promise<UserSettings> {
      const user = requireSession(who, 'changing the account settings');
      const passwordHash = patch.new_password === undefined ? undefined : await hashPassword(patch.new_password);
      let emailChanged = false;
      const row = await events
        .transaction(async (tx, emit) => {
          const [current] = await tx<UserRow[]>`select * from users where id = ${user.userId} for update`;
          if (!current) throw new ApiError('invalid_token', 'the account behind this token no longer exists');
          if (passwordHash !== undefined && !(await verifyPassword(current.password_hash, patch.current_password ?? ''))) {
            throw new ApiError('wrong_password', current.password_hash === null
              ? 'current_password: this account has no password (it signs in through OIDC)'
              : 'current_password: wrong password');
          }
          const preferences = { ...current.settings };
          for (const [key, value] of Object.entries(patch.preferences ?? {})) {
            if (value === null) delete preferences[key];
            else preferences[key] = value;
          }
          if (Object.keys(preferences).length > 32) throw new ApiError('invalid_body', 'preferences: at most 32 preferences');
          emailChanged = patch.email !== undefined && patch.email.toLowerCase() !== (current.email ?? '').toLowerCase();
          const [updated] = await tx<UserRow[]>`
            update users set
              name = ${patch.name ?? current.name},
              email = ${emailChanged ? patch.email! : current.email},
              email_verified = ${emailChanged ? false : current.email_verified},
              password_hash = ${passwordHash ?? current.password_hash},
              settings = ${tx.json(preferences as never)},
              updated_at = now()
            where id = ${user.userId}
            returning *`;
          // Field names only, never their values (a password above all).
          const changes = Object.keys(patch).filter((k) => k !== 'current_password' && patch[k as keyof SettingsPatch] !== undefined)
            .map((k) => (k === 'new_password' ? 'password' : k));
          emit('user.update', { user: updated!.username, user_id: updated!.id, changes }, { userId: updated!.id });
          return updated!;
        })
        .catch((e: unknown) => {
          throw userConflict(e, user.username, patch.email ?? null) ?? e;
        });
      if (passwordHash !== undefined) await sessions.revokeAll(user.userId, 'password_change', user.sessionId);
      if (emailChanged && row.email) await verification.send({ id: row.id, username: row.username, email: row.email });
      return toSettings(row);
    },
  };
}
