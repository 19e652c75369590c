// Turns a failed first connection into a message that says what to do about it.
import { describeTarget, type DatabaseTarget } from './databaseUrl.js';

export function connectionFailure(cause: unknown, target: DatabaseTarget, urlIsDefault: boolean): Error {
  const reason = explain(cause);
  if (urlIsDefault) {
    return new Error(
      `could not connect to PostgreSQL at the default database.url, ${describeTarget(target)}: ${reason}. ` +
        'kiln needs a database: either point it at one with database.url (environment SERVICE_DATABASE_URL, or database.urlFile), ' +
        'or set localDb.enable = true to let kiln run its own PostgreSQL under baseDir.',
      { cause },
    );
  }
  return new Error(`could not connect to PostgreSQL at database.url, ${describeTarget(target)}: ${reason}`, { cause });
}

function explain(cause: unknown): string {
  const code = typeof cause === 'object' && cause !== null && 'code' in cause ? String(cause.code) : '';
  if (code === 'ENOENT') return 'no server is listening there (the socket does not exist)';
  if (code === 'ECONNREFUSED') return 'the connection was refused (no server is listening there)';
  if (code === 'CONNECT_TIMEOUT') return 'the connection timed out';
  return cause instanceof Error ? cause.message : String(cause);
}
