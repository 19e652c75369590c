// PostgreSQL session-level advisory locks, and the one liveness rule built on them
// (docs/architecture.md, "Liveness"). A lock held on a reserved connection lasts as long as that
// session: when the process dies, even by SIGKILL, PostgreSQL ends the session and drops the lock,
// so every other process sees at once that the holder is gone, without a heartbeat or a timeout.
// Each server process holds one instance lease (a lock on a key of its own); the rows it works on
// name that key, and the SQL conditions below tell a live holder from a dead one.
import { randomInt } from 'node:crypto';
import type { Fragment, ISql, ReservedSql, Sql } from 'postgres';

/** The first key of the two-key locks: "kiln" in ASCII, so kiln's locks are recognisable in pg_locks. */
export const LEASE_NAMESPACE = 0x6b696c6e;

/** A lock key: one bigint, or kiln's namespace and a 32-bit key (objsubid 1 and 2 in pg_locks). */
export type AdvisoryKey = { single: number } | { inNamespace: number };

export interface HeldLock {
  release(): Promise<void>;
}

const tryLock = (conn: ReservedSql, key: AdvisoryKey) => ('single' in key
  ? conn<{ locked: boolean }[]>`select pg_try_advisory_lock(${key.single}) as locked`
  : conn<{ locked: boolean }[]>`select pg_try_advisory_lock(${LEASE_NAMESPACE}::int, ${key.inNamespace}::int) as locked`);

const unlock = (conn: ReservedSql, key: AdvisoryKey) => ('single' in key
  ? conn`select pg_advisory_unlock(${key.single})`
  : conn`select pg_advisory_unlock(${LEASE_NAMESPACE}::int, ${key.inNamespace}::int)`);

/** Takes the lock on a connection of its own if nobody holds it; null when another session does. */
export async function trySessionLock(sql: Sql, key: AdvisoryKey): Promise<HeldLock | null> {
  const conn = await sql.reserve();
  try {
    const [row] = await tryLock(conn, key);
    if (!row?.locked) {
      conn.release();
      return null;
    }
  } catch (error) {
    conn.release();
    throw error;
  }
  let released = false;
  return {
    async release() {
      if (released) return;
      released = true;
      await unlock(conn, key).catch(() => undefined);
      conn.release();
    },
  };
}

export interface InstanceLease extends HeldLock {
  /** this process's key: rows it works on name it (event_deliveries.claimed_by, staged_uploads.writer, server_instances.lock_key) */
  readonly key: number;
}

/** This process's lease on a free random key in kiln's namespace; one per process (services/workers/serverInstance.ts). */
export async function acquireInstanceLease(sql: Sql): Promise<InstanceLease> {
  for (let tries = 0; tries < 20; tries++) {
    const key = randomInt(1, 2 ** 31 - 1);
    const held = await trySessionLock(sql, { inNamespace: key });
    if (held) return { key, release: () => held.release() };
  }
  throw new Error('could not find a free instance lease key in 20 tries');
}

/** SQL condition: the process whose lease key is in `holder` (a column) is alive. */
export const leaseHeldCondition = (sql: ISql, holder: Fragment) => sql`
  exists (
    select from pg_locks l
    where l.locktype = 'advisory' and l.granted
      and l.database = (select oid from pg_database where datname = current_database())
      and l.classid = ${LEASE_NAMESPACE}::int::oid and l.objid = (${holder})::oid and l.objsubid = 2)`;

/**
 * SQL condition: the process whose lease key is in `holder` (a column; by default a delivery row
 * `d`'s claimed_by) holds its lease no more. Staged uploads name their writer the same way.
 */
export const leaseLostCondition = (sql: ISql, holder: Fragment = sql`d.claimed_by`) => sql`not ${leaseHeldCondition(sql, holder)}`;
