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
export async function pipelinedTransaction<T>(sql: Sql, fn: (tx: TransactionSql) => Promise<T>): Promise<T> {
  const reserved = await sql.reserve();
  try {
    const begun = reserved`begin`.execute();
    // handled at once: a failed begin must not count as an unhandled rejection while fn runs (its statements fail too)
    begun.catch(() => undefined);
    let value: T;
    try {
      value = await fn(reserved as unknown as TransactionSql);
      await begun;
    } catch (error) {
      await reserved`rollback`.catch(() => undefined);
      throw error;
    }
    const committed = await reserved`commit`;
    if (committed.command !== 'COMMIT') throw new Error(`the transaction was rolled back (${committed.command}): one of its statements failed`);
    return value;
  } finally {
    reserved.release();
  }
}
