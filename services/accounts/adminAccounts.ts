// What superusers read about the instance's accounts: every user with their count of active
// sessions, and the sessions themselves (who, since when, from where), a page at a time.
import { ApiError, type AdminSessionsQuery, type AdminUsersQuery } from '../../protocol/index.js';
import { isSuperuser, superuserRefusal, type Principal } from '../access/index.js';
import type { IdentityDeps } from './identityDeps.js';
import { toUserView, type UserRow, type UserView } from './userView.js';

export interface AdminUserView extends UserView {
  disabled: boolean;
  active_sessions: number;
}

export interface SessionView {
  id: string;
  user: string;
  user_id: string;
  created_at: Date;
  expires_at: Date;
  revoked_at: Date | null;
  user_agent: string | null;
  address: string | null;
  current: boolean;
}

/** A LIKE pattern that matches `text` anywhere, with LIKE's own characters taken literally. */
const containsPattern = (text: string) => `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

function demandSuperuser(who: Principal, refusal: string): void {
  if (!isSuperuser(who)) throw new ApiError('forbidden', superuserRefusal(who, refusal));
}

export function adminAccountsService({ sql, clock }: Pick<IdentityDeps, 'sql' | 'clock'>) {
  return {
    /** GET /admin/users: by username; search matches the username, name or e-mail. */
    async users(who: Principal, query: AdminUsersQuery): Promise<{ users: AdminUserView[]; page: number; per_page: number; total: number }> {
      demandSuperuser(who, 'only superusers may list accounts');
      const text = query.search?.trim();
      const where = text
        ? sql`where u.username ilike ${containsPattern(text)} or u.name ilike ${containsPattern(text)} or u.email ilike ${containsPattern(text)}`
        : sql``;
      const now = clock.now();
      const [counted] = await sql<{ n: string }[]>`select count(*) as n from users u ${where}`;
      const rows = await sql<(UserRow & { active_sessions: string })[]>`
        select u.*, (select count(*) from sessions s where s.user_id = u.id and s.revoked_at is null and s.expires_at > ${now}) as active_sessions
        from users u ${where} order by u.username limit ${query.per_page} offset ${(query.page - 1) * query.per_page}`;
      return {
        users: rows.map((r) => ({ ...toUserView(r), disabled: r.disabled, active_sessions: Number(r.active_sessions) })),
        page: query.page, per_page: query.per_page, total: Number(counted!.n),
      };
    },

    /** GET /admin/sessions: newest first; an unknown user is a 404. */
    async sessions(who: Principal, query: AdminSessionsQuery): Promise<{ sessions: SessionView[]; page: number; per_page: number; total: number }> {
      demandSuperuser(who, 'only superusers may list sessions');
      let userId: string | null = null;
      if (query.user) {
        const [user] = await sql<{ id: string }[]>`select id from users where username = ${query.user}`;
        if (!user) throw new ApiError('not_found', `no user "${query.user}"`);
        userId = user.id;
      }
      const now = clock.now();
      const where = sql`where true ${userId ? sql`and s.user_id = ${userId}` : sql``}
        ${query.state === 'active' ? sql`and s.revoked_at is null and s.expires_at > ${now}` : sql``}`;
      const [counted] = await sql<{ n: string }[]>`select count(*) as n from sessions s ${where}`;
      const rows = await sql<Omit<SessionView, 'current'>[]>`
        select s.id, u.username as user, s.user_id, s.created_at, s.expires_at, s.revoked_at, s.user_agent, s.address
        from sessions s join users u on u.id = s.user_id ${where}
        order by s.created_at desc, s.id limit ${query.per_page} offset ${(query.page - 1) * query.per_page}`;
      const current = who.kind === 'user' && who.via === 'session' ? who.sessionId : null;
      return { sessions: rows.map((r) => ({ ...r, current: r.id === current })), page: query.page, per_page: query.per_page, total: Number(counted!.n) };
    },
  };
}
export type AdminAccounts = ReturnType<typeof adminAccountsService>;
