// A transaction whose `begin` goes out together with its first statement. postgres.js's
// sql.begin() waits for `begin` to be answered before it runs the transaction's function: one
// round trip more per transaction, which the scheduler's status batches pay on the dispatch path
// (issue 23; docs/builds.md). Here `begin` is queued on a reserved connection and the function's
// statements follow it at once; PostgreSQL runs them in order, so they are inside the transaction.
import type { Sql, TransactionSql } from 'postgres';

/**
 * Runs `fn` in a transaction on a connection of its own and commits, or rolls back and throws when
 * `fn` or any of its statements failed (a statement error `fn` caught still rolls back: PostgreSQL
 * answers the commit of a failed transaction with ROLLBACK, which throws here as sql.begin does).
 * `fn` gets the reserved connection typed as a transaction, without savepoints (none is offered).
 */
export async function pipelinedTransaction<T>(sql: Sql, fn: (tx: TransactionSql) => Promise<T>, opts: { genericPlans?: boolean } = {}): Promise<T> {
  const reserved = await sql.reserve();
  let dead = false;
  try {
    // genericPlans: the transaction's prepared statements are not planned again for their values
    // (plan_cache_mode, for this transaction only; docs/builds.md "Plans of the status batches").
    // One simple-protocol message, so no round trip more.
    const begun = opts.genericPlans
      ? reserved.unsafe('begin; set local plan_cache_mode = force_generic_plan').simple().execute()
      : reserved`begin`.execute();
    // handled at once: a failed begin must not count as an unhandled rejection while fn runs (its statements fail too)
    begun.catch(() => undefined);
    let value: T;
    try {
      value = await fn(reserved as unknown as TransactionSql);
      await begun;
    } catch (error) {
      if (connectionLost(error)) {
        dead = true;
        throw error;
      }
      await reserved`rollback`.catch(() => undefined);
      throw error;
    }
    const committed = await reserved`commit`;
    if (committed.command !== 'COMMIT') throw new Error(`the transaction was rolled back (${committed.command}): one of its statements failed`);
    return value;
  } catch (error) {
    if (connectionLost(error)) dead = true;
    throw error;
  } finally {
    // A lost connection is already back in the pool's closed queue (it reconnects when next
    // needed): releasing it would put it among the open ones, and the next query written to its
    // dead socket throws from a timer (postgres.js 3.4, porsager/postgres#1208). No rollback is
    // written to it either; PostgreSQL rolled the transaction back when the session ended.
    if (!dead) reserved.release();
  }
}

/** The session is gone: postgres.js's connection errors, a FATAL or PANIC from the server, a socket error. */
function connectionLost(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { code, severity, errno } = error as { code?: unknown; severity?: unknown; errno?: unknown };
  return (typeof code === 'string' && code.startsWith('CONNECTION_')) || severity === 'FATAL' || severity === 'PANIC' || errno !== undefined;
}
