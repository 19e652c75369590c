// One query on the NAR tables: locks a NAR file against a concurrent deletion.
import type { TransactionSql } from 'postgres';

/**
 * Serialises writers and deleters of one blob until the transaction ends (0005_nars.sql): an
 * upload holds it from its put to its commit, a deleter from its check to its delete.
 */
export async function lockNarFile(tx: TransactionSql, fileHash: string): Promise<void> {
  await tx`select pg_advisory_xact_lock(hashtextextended(${`nar:${fileHash}`}, 0))`;
}
