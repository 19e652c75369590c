// Browser sessions: opened at sign-in, expiring after SESSION_LIFETIME_MS.
import type { TransactionSql } from 'postgres';
import { ApiError, type UserSessionView } from '../../protocol/index.js';
import type { Principal, SessionUser } from '../access/index.js';
import { requireSession } from '../access/index.js';
import type { IdentityDeps } from './identityDeps.js';
import { loadJwtSecret, sessionTokenCodec } from './sessionTokens.js';

/** Sessions last 30 days from sign-in; there is no sliding renewal (sign in again). */
export const SESSION_LIFETIME_MS = 30 * 24 * 60 * 60 * 1000;

/** last_used_at is written at most this often per session, so a busy browser does not write on every request. */
const LAST_USED_RESOLUTION_MS = 60_000;

export interface NewSession {
  token: string;
  sessionId: string;
  expiresAt: Date;
}

export interface SessionOrigin {
  userAgent?: string | undefined;
  address?: string | undefined;
}

export type Sessions = Awaited<ReturnType<typeof openSessions>>;

interface SessionRow {
  revoked_at: Date | null;
  expires_at: Date;
  last_used_at: Date | null;
  username: string;
  superuser: boolean;
  disabled: boolean;
}

/** Why a session ended early: session.revoke's `reason` (user_revoke: DELETE /user/sessions/{session} on another of the user's sessions). */
export type RevokeReason = 'logout' | 'password_change' | 'account_disabled' | 'user_revoke';

interface OwnSessionRow {
  id: string;
  created_at: Date;
  last_used_at: Date | null;
  expires_at: Date;
  user_agent: string | null;
  address: string | null;
}

export async function openSessions({ sql, config, clock, events }: Pick<IdentityDeps, 'sql' | 'config' | 'clock' | 'events'>) {
  const codec = sessionTokenCodec(await loadJwtSecret(sql, config));
  /** Revokes the sessions `where` selects, with a session.revoke each, in one transaction. */
  const revokeWhere = (reason: RevokeReason, select: (tx: TransactionSql) => Promise<{ id: string }[]>) =>
    events.transaction(async (tx, emit) => {
      const ids = (await select(tx)).map((r) => r.id);
      if (ids.length === 0) return;
      const revoked = await tx<{ id: string; user_id: string; username: string }[]>`
        update sessions s set revoked_at = ${clock.now()} from users u
        where s.id = any(${ids}::uuid[]) and s.revoked_at is null and u.id = s.user_id
        returning s.id, s.user_id, u.username`;
      for (const r of revoked) emit('session.revoke', { user: r.username, user_id: r.user_id, session_id: r.id, reason }, { userId: r.user_id });
    });
  const revoke = (sessionId: string, reason: RevokeReason = 'logout'): Promise<void> =>
    revokeWhere(reason, async () => [{ id: sessionId }]);
  return {
    /** A session row and its token, for a user who just proved who they are; login.success in the same transaction. */
    async create(user: { id: string; username: string }, origin: SessionOrigin = {}, method: 'password' | 'oidc' = 'password'): Promise<NewSession> {
      const userId = user.id;
      const now = clock.now();
      const expiresAt = new Date(now.getTime() + SESSION_LIFETIME_MS);
      const sessionId = await events.transaction(async (tx, emit) => {
        const [row] = await tx<{ id: string }[]>`
          insert into sessions (user_id, created_at, expires_at, user_agent, address)
          values (${userId}, ${now}, ${expiresAt}, ${origin.userAgent?.slice(0, 500) ?? null}, ${origin.address ?? null})
          returning id`;
        emit('login.success', {
          user: user.username, user_id: userId, method, session_id: row!.id, ...(origin.address ? { address: origin.address } : {}),
        }, { userId });
        return row!.id;
      });
      return { token: await codec.sign({ userId, sessionId }, now, expiresAt), sessionId, expiresAt };
    },

    /** The principal a session token stands for; 401 for a bad, expired or logged-out token, 403 for a disabled account. */
    async authenticate(token: string): Promise<SessionUser> {
      const now = clock.now();
      const verified = await codec.verify(token, now);
      if (!verified.ok) {
        throw verified.reason === 'expired'
          ? new ApiError('token_expired', 'the session has expired; sign in again')
          : new ApiError('invalid_token', 'the bearer token is not valid');
      }
      const { userId, sessionId } = verified.claims;
      const [row] = await sql<SessionRow[]>`
        select s.revoked_at, s.expires_at, s.last_used_at, u.username, u.superuser, u.disabled
        from sessions s join users u on u.id = s.user_id
        where s.id = ${sessionId} and s.user_id = ${userId}`;
      if (!row || row.revoked_at !== null) throw new ApiError('invalid_token', 'the session was logged out or no longer exists; sign in again');
      if (row.expires_at <= now) throw new ApiError('token_expired', 'the session has expired; sign in again');
      if (row.disabled) throw new ApiError('account_disabled', 'this account is disabled');
      if (row.last_used_at === null || now.getTime() - row.last_used_at.getTime() >= LAST_USED_RESOLUTION_MS) {
        await sql`update sessions set last_used_at = ${now} where id = ${sessionId}`;
      }
      return { kind: 'user', via: 'session', userId, username: row.username, superuser: row.superuser, sessionId };
    },

    revoke,

    /** POST /auth/logout: ends the caller's own session; the token is refused from now on. */
    async logout(who: Principal): Promise<string> {
      const session = requireSession(who, 'logging out');
      await revoke(session.sessionId);
      return 'logged out';
    },

    /**
     * GET /user/sessions: the caller's own sessions that are neither revoked nor expired, newest first; `current`
     * marks the caller's. A session token only: the sign-in addresses and browsers are the account's business, not
     * that of a CI key (a project-pinned one included).
     */
    async listOwn(who: Principal): Promise<UserSessionView[]> {
      const user = requireSession(who, 'listing your sessions');
      const rows = await sql<OwnSessionRow[]>`
        select id, created_at, last_used_at, expires_at, user_agent, address from sessions
        where user_id = ${user.userId} and revoked_at is null and expires_at > ${clock.now()}
        order by created_at desc, id`;
            return rows.map((r) => ({
        id: r.id,
        created_at: r.created_at.toISOString(),
        last_used_at: r.last_used_at?.toISOString() ?? null,
        expires_at: r.expires_at.toISOString(),
        user_agent: r.user_agent,
        address: r.address,
        current: r.id === user.sessionId,
      }));
    },

    /**
     * DELETE /user/sessions/{session}: revokes one of the caller's own sessions (a session token only). Another
     * account's session, or one already revoked or expired, is a 404 like one that never existed. Revoking the
     * current session is logging out.
     */
    async revokeOwn(who: Principal, sessionId: string): Promise<string> {
      const user = requireSession(who, 'revoking a session');
      const reason: RevokeReason = sessionId === user.sessionId ? 'logout' : 'user_revoke';
      let found = false;
      await revokeWhere(reason, async (tx) => {
        const rows = await tx<{ id: string }[]>`
          select id from sessions where id = ${sessionId} and user_id = ${user.userId} and revoked_at is null and expires_at > ${clock.now()} for update`;
        found = rows.length > 0;
        return rows;
      });
      if (!found) throw new ApiError('session_not_found', `you have no active session ${sessionId}`);
      return reason === 'logout' ? 'logged out' : 'session revoked';
    },

    /** Logs out every session of a user but `keep` (after a password change, or when SCIM disables the account). */
    async revokeAll(userId: string, reason: RevokeReason, keep: string | null = null): Promise<void> {
      await revokeWhere(reason, (tx) => tx<{ id: string }[]>`
        select id from sessions where user_id = ${userId} and revoked_at is null and id is distinct from ${keep} for update`);
    },
  };
}
