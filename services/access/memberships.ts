// Membership rows of the three scopes, which differ only in table and key column.
import { ApiError, type Role } from '../../protocol/index.js';
import type { Queryable } from '../../storage/index.js';
import type { Scope } from './roles.js';

const tables: Record<Scope, { table: string; key: string }> = {
  organization: { table: 'organization_members', key: 'organization_id' },
  project: { table: 'project_members', key: 'project_id' },
  cache: { table: 'cache_members', key: 'cache_id' },
};

export interface MemberView {
  user: string;
  name: string;
  role: Role;
  created_at: Date;
}

export async function listMembers(sql: Queryable, scope: Scope, id: string): Promise<MemberView[]> {
  const { table, key } = tables[scope];
  return sql<MemberView[]>`
    select u.username as user, u.name, m.role, m.created_at
    from ${sql(table)} m join users u on u.id = m.user_id
    where m.${sql(key)} = ${id} order by u.username`;
}

/** The id of an account by username; 404 user_not_found otherwise. */
export async function findUserId(sql: Queryable, username: string): Promise<string> {
  const [row] = await sql<{ id: string }[]>`select id from users where username = ${username}`;
  if (!row) throw new ApiError('user_not_found', `no user "${username}"`);
  return row.id;
}

export async function roleOf(sql: Queryable, scope: Scope, id: string, userId: string): Promise<Role | null> {
  const { table, key } = tables[scope];
  const [row] = await sql<{ role: Role }[]>`select role from ${sql(table)} where ${sql(key)} = ${id} and user_id = ${userId}`;
  return row?.role ?? null;
}

/** Adds a member; 409 already_member when the account is one. */
export async function insertMember(sql: Queryable, scope: Scope, id: string, userId: string, role: Role, label: string): Promise<void> {
  const { table, key } = tables[scope];
  const rows = await sql`
    insert into ${sql(table)} (${sql(key)}, user_id, role) values (${id}, ${userId}, ${role})
    on conflict do nothing returning user_id`;
  if (rows.length === 0) throw new ApiError('already_member', `the user is already a member of ${label}`);
}

/** An organization keeps at least one Admin, or nobody could manage it any more. */
async function demandAnotherAdmin(sql: Queryable, scope: Scope, id: string, userId: string, label: string): Promise<void> {
  if (scope !== 'organization') return;
  const { table, key } = tables[scope];
  const [row] = await sql<{ n: number }[]>`
    select count(*)::int as n from ${sql(table)} where ${sql(key)} = ${id} and role = 'Admin' and user_id <> ${userId}`;
  if ((row?.n ?? 0) === 0) throw new ApiError('last_admin', `${label} needs at least one other Admin first`);
}

export async function changeMemberRole(sql: Queryable, scope: Scope, id: string, userId: string, role: Role, label: string): Promise<void> {
  const current = await roleOf(sql, scope, id, userId);
  if (!current) throw new ApiError('not_member', `the user is not a member of ${label}`);
  if (current === 'Admin' && role !== 'Admin') await demandAnotherAdmin(sql, scope, id, userId, label);
  const { table, key } = tables[scope];
  await sql`update ${sql(table)} set role = ${role} where ${sql(key)} = ${id} and user_id = ${userId}`;
}

export async function deleteMember(sql: Queryable, scope: Scope, id: string, userId: string, label: string): Promise<void> {
  const current = await roleOf(sql, scope, id, userId);
  if (!current) throw new ApiError('not_member', `the user is not a member of ${label}`);
  if (current === 'Admin') await demandAnotherAdmin(sql, scope, id, userId, label);
  const { table, key } = tables[scope];
  await sql`delete from ${sql(table)} where ${sql(key)} = ${id} and user_id = ${userId}`;
}
