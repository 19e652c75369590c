// What a superuser reads about the instance's accounts: every user (GET /admin/users) and every
// session (GET /admin/sessions), a page at a time. Views only: these take no body.
import { z } from 'zod';
import { Username } from './names.js';
import { UserView } from './accounts.js';

const Timestamp = z.iso.datetime({ offset: true });
/** Where a page of a list stands: its number, its size and how many items there are in all. */
const PageFields = { page: z.int(), per_page: z.int(), total: z.int() };
const Paging = {
  page: z.coerce.number().int().min(1).max(1_000_000).default(1),
  per_page: z.coerce.number().int().min(1).max(200).default(50),
};

/** GET /admin/users?page=&per_page=&search= (search: a case-insensitive part of the username, name or e-mail) */
export const AdminUsersQuery = z.strictObject({
  ...Paging,
  search: z.string().max(200, 'search is at most 200 characters').optional(),
});
export type AdminUsersQuery = z.infer<typeof AdminUsersQuery>;

/** An account as the superuser sees it: what the account itself sees (GET /user), and more. */
export const AdminUserView = UserView.extend({
  /** SCIM active: false; such an account cannot sign in */
  disabled: z.boolean(),
  /** sessions neither revoked nor expired */
  active_sessions: z.int().min(0),
});
export type AdminUserView = z.infer<typeof AdminUserView>;

export const AdminUsersPage = z.strictObject({
  users: z.array(AdminUserView),
  ...PageFields,
});
export type AdminUsersPage = z.infer<typeof AdminUsersPage>;

/** GET /admin/sessions?page=&per_page=&user=&state= (newest first) */
export const AdminSessionsQuery = z.strictObject({
  ...Paging,
  /** only this account's sessions */
  user: Username.optional(),
  /** active: neither revoked nor expired (the default); all: every session kept */
  state: z.enum(['active', 'all']).default('active'),
});
export type AdminSessionsQuery = z.infer<typeof AdminSessionsQuery>;

export const SessionView = z.strictObject({
  id: z.uuid(),
  user: z.string(),
  user_id: z.uuid(),
  created_at: Timestamp,
  expires_at: Timestamp,
  revoked_at: Timestamp.nullable(),
  /** the User-Agent of the sign-in, cut to 500 characters */
  user_agent: z.string().nullable(),
  /** the client address of the sign-in */
  address: z.string().nullable(),
  /** the session making this request */
  current: z.boolean(),
});
export type SessionView = z.infer<typeof SessionView>;

export const AdminSessionsPage = z.strictObject({
  sessions: z.array(SessionView),
  ...PageFields,
});
export type AdminSessionsPage = z.infer<typeof AdminSessionsPage>;
