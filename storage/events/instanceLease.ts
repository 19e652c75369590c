// Which server processes are alive. Each process holds a session-level advisory lock on a key of
// its own for as long as it runs; a delivery being attempted names that key (claimed_by). When the
// process dies, PostgreSQL ends its session and drops the lock, so any other process (or the same
// one after a restart) sees at once that the attempt was interrupted, without waiting for a timeout.
import { randomInt } from 'node:crypto';
import type { Fragment, ISql, ReservedSql, Sql } from 'postgres';

/** The first advisory lock key: "kiln" in ASCII, so the locks are recognisable in pg_locks. */
export const LEASE_NAMESPACE = 0x6b696c6e;

export interface InstanceLease {
  /** this process's key, stored in event_deliveries.claimed_by */
  readonly key: number;
  release(): Promise<void>;
}

export async function acquireInstanceLease(sql: Sql): Promise<InstanceLease> {
  const conn: ReservedSql = await sql.reserve();
  try {
    for (let tries = 0; tries < 20; tries++) {
      const key = randomInt(1, 2 ** 31 - 1);
      const [row] = await conn<{ locked: boolean }[]>`select pg_try_advisory_lock(${LEASE_NAMESPACE}::int, ${key}::int) as locked`;
      if (row?.locked) {
        let released = false;
        return {
          key,
          async release() {
            if (released) return;
            released = true;
            await conn`select pg_advisory_unlock(${LEASE_NAMESPACE}::int, ${key}::int)`.catch(() => undefined);
            conn.release();
          },
        };
      }
    }
    throw new Error('could not find a free instance key for the delivery lease in 20 tries');
  } catch (error) {
    conn.release();
    throw error;
  }
}

/**
 * SQL condition: the process whose lease key is in `holder` (a column; by default a delivery row
 * `d`'s claimed_by) holds its lease no more. Staged uploads name their writer the same way.
 */
export const leaseLostCondition = (sql: ISql, holder: Fragment = sql`d.claimed_by`) => sql`
  not exists (
    select from pg_locks l
    where l.locktype = 'advisory' and l.granted
      and l.database = (select oid from pg_database where datname = current_database())
      and l.classid = ${LEASE_NAMESPACE}::int::oid and l.objid = (${holder})::oid and l.objsubid = 2)`;
