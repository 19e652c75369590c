// Settings of the PostgreSQL server kiln cannot change itself (on an external database) but depends on.
import type { Sql } from 'postgres';
import type { Logger } from 'pino';

// configuration.md, localDb: "the server warns below 256".
const MIN_LOCKS_PER_TRANSACTION = 256;

export async function checkServerSettings(sql: Sql, pooledConnections: number, log: Logger): Promise<void> {
  const [row] = await sql<{ locks: number; connections: number; version: string }[]>`
    select current_setting('max_locks_per_transaction')::int as locks,
           current_setting('max_connections')::int as connections,
           current_setting('server_version') as version`;
  if (!row) return;
  if (row.locks < MIN_LOCKS_PER_TRANSACTION) {
    log.warn(
      { max_locks_per_transaction: row.locks },
      `the database's max_locks_per_transaction is ${row.locks}, below the ${MIN_LOCKS_PER_TRANSACTION} kiln needs for large evaluations; set it to 1024 in postgresql.conf and restart PostgreSQL`,
    );
  }
  if (row.connections < pooledConnections) {
    log.warn(
      { max_connections: row.connections, pooled: pooledConnections },
      `the database allows ${row.connections} connections but kiln's three pools may open ${pooledConnections}; raise max_connections or lower database.*.maxConnections`,
    );
  }
  log.debug({ serverVersion: row.version }, 'connected to PostgreSQL');
}
