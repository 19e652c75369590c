// This server process as the other processes on the database see it (migration 0014): a row
// naming an instance lease (storage/db/advisoryLocks.ts), the advisory lock the process holds
// on a connection of its own while it lives. Liveness is the lock, so a process killed with
// SIGKILL is seen dead as soon as PostgreSQL drops its session.
import { hostname } from 'node:os';
import type { Sql } from 'postgres';
import { acquireInstanceLease } from '../../storage/index.js';

export interface ServerInstance {
  readonly id: string;
  /** the instance lease's key: the NAR storage claims the staged uploads it works on with it */
  readonly leaseKey: number;
  close(): Promise<void>;
}

export async function openServerInstance(sql: Sql): Promise<ServerInstance> {
  const lease = await acquireInstanceLease(sql);
  try {
    // A row left by a dead process may name the key: the lock says it is ours now.
    await sql`delete from server_instances where lock_key = ${lease.key}`;
    const [row] = await sql<{ id: string }[]>`
      insert into server_instances (lock_key, hostname, pid) values (${lease.key}, ${hostname().slice(0, 255)}, ${process.pid}) returning id`;
    const id = row!.id;
    return {
      id,
      leaseKey: lease.key,
      async close() {
        await sql`delete from server_instances where id = ${id}`.catch(() => undefined);
        await lease.release();
      },
    };
  } catch (e) {
    await lease.release();
    throw e;
  }
}
