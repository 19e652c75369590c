import { randomInt } from 'node:crypto';
import { hostname } from 'node:os';
import type { ReservedSql, Sql } from 'postgres';

// This server process as the other processes on the database see it (migration 0014): a row, and
// an advisory lock held on a reserved connection for as long as the process lives. Liveness is
// the lock, so a process killed with SIGKILL is seen dead as soon as PostgreSQL drops its session.

/** The first key of the two-key advisory locks that mark live server processes. */
export const INSTANCE_LOCK_SPACE = 7_414_102;

export interface ServerInstance {
  readonly id: string;
  close(): Promise<void>;
}

export async function registerServerInstance(sql: Sql): Promise<ServerInstance> {
  const conn: ReservedSql = await sql.reserve();
  try {
    for (;;) {
      const key = randomInt(0, 2 ** 31 - 1);
      const [taken] = await conn<{ ok: boolean }[]>`select pg_try_advisory_lock(${INSTANCE_LOCK_SPACE}, ${key}) as ok`;
      if (!taken?.ok) continue;
      // A row left by a dead process may hold the key: the lock says it is ours now.
      await conn`delete from server_instances where lock_key = ${key}`;
      const [row] = await conn<{ id: string }[]>`
        insert into server_instances (lock_key, hostname, pid) values (${key}, ${hostname().slice(0, 255)}, ${process.pid}) returning id`;
      const id = row!.id;
      return {
        id,
        async close() {
          await conn`delete from server_instances where id = ${id}`.catch(() => undefined);
          await conn`select pg_advisory_unlock(${INSTANCE_LOCK_SPACE}, ${key})`.catch(() => undefined);
          conn.release();
        },
      };
    }
  } catch (e) {
    conn.release();
    throw e;
  }
}
