import type { Role } from '../protocol/index.js';
import type { Principal } from './principal.js';
import type { Queryable } from './queryable.js';

// A cache's row as the cache API shows it, with the caller's role (the owner is Admin; else the
// membership), in one query; and the list of every cache a caller could see.

export interface CacheRecord {
  id: string;
  name: string;
  description: string;
  public: boolean;
  priority: number;
  local_priority: number;
  active: boolean;
  owner_id: string | null;
  owner: string | null;
  max_storage_bytes: string | null;
  key_name: string;
  public_key: Buffer;
  state_managed: boolean;
  created_at: Date;
  role: Role | null;
}

const userOf = (who: Principal): string | null => (who.kind === 'user' ? who.userId : null);

const columns = (sql: Queryable, who: Principal) => sql`
  select c.id, c.name, c.description, c.public, c.priority, c.local_priority, c.active, c.owner_id, u.username as owner,
         c.max_storage_bytes, c.key_name, c.public_key, c.state_managed, c.created_at,
         case when c.owner_id is not null and c.owner_id = ${userOf(who)} then 'Admin' else m.role end as role
  from caches c
  left join users u on u.id = c.owner_id
  left join cache_members m on m.cache_id = c.id and m.user_id = ${userOf(who)}`;

export async function findCacheRecord(sql: Queryable, who: Principal, name: string): Promise<CacheRecord | null> {
  const [row] = await sql<CacheRecord[]>`${columns(sql, who)} where c.name = ${name}`;
  return row ?? null;
}

export async function findCacheRecordById(sql: Queryable, who: Principal, id: string): Promise<CacheRecord | null> {
  const [row] = await sql<CacheRecord[]>`${columns(sql, who)} where c.id = ${id}`;
  return row ?? null;
}

/** Public caches and those the caller owns or is a member of, by name; the access engine filters further (key pins). */
export async function listCandidateCaches(sql: Queryable, who: Principal): Promise<CacheRecord[]> {
  return sql<CacheRecord[]>`
    ${columns(sql, who)}
    where c.public or c.owner_id = ${userOf(who)} or m.role is not null
    order by c.name`;
}
