// Rows for PostgreSQL's COPY … FROM STDIN in its text format, and the COPY itself on postgres.js:
// the bulk path for writes of thousands of rows (an evaluation's derivation graph, issue 23), where
// parameters or a jsonb document cost the server a parse per value. Every value is escaped here,
// so text from a worker (names, paths) cannot end a field or a row early.
import type { TransactionSql } from 'postgres';

export type CopyValue = string | number | boolean | null;

/** COPY text format: backslash, tab, newline and carriage return are escaped; null is \N. */
export function copyField(value: CopyValue): string {
  if (value === null) return '\\N';
  // PostgreSQL's text cannot hold NUL: refused here by name, not as a failed COPY
  if (typeof value === 'string' && value.includes('\0')) throw new Error('text with a NUL character cannot be stored');
  if (typeof value === 'boolean') return value ? 't' : 'f';
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Error(`cannot COPY the number ${value}`);
    return String(value);
  }
  // eslint-disable-next-line no-control-regex
  return /[\\\t\n\r]/.test(value) ? value.replace(/[\\\t\n\r]/g, (c) => COPY_ESCAPES[c]!) : value;
}

const COPY_ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' };

/** A text[] literal: every element double-quoted, its backslashes and quotes escaped (then COPY-escaped by copyField). */
export function arrayLiteral(values: readonly string[]): string {
  return `{${values.map((v) => `"${v.replace(/[\\"]/g, (c) => `\\${c}`)}"`).join(',')}}`;
}

/** One COPY row, newline-terminated. */
export const copyRow = (fields: readonly CopyValue[]): string => `${fields.map(copyField).join('\t')}\n`;

/**
 * Streams `rows` (copyRow lines, joined) into `table (columns)` inside the caller's transaction;
 * resolves once the server has taken them all, rejects when it refused them. `next` issues the
 * statements that follow the COPY (its value is returned): they are written right behind the
 * COPY's end, without a round trip of their own (the default is a `select 1`). `next` must issue at
 * least one statement before it awaits anything: a refusal after the COPY's end is only reported
 * through the statement that follows it (below), so a `next` that issues none would wait for ever
 * with the transaction open (review r5c-4).
 */
export async function copyInto<T = unknown>(tx: TransactionSql, table: string, columns: readonly string[], rows: string, next?: () => Promise<T>): Promise<T> {
  const after = next ?? (() => tx`select 1` as unknown as Promise<T>);
  if (rows.length === 0) return after();
  const stream = await tx.unsafe(`copy ${table} (${columns.join(', ')}) from stdin`).writable();
  // `on`, not `once`: a stream whose connection dies can be destroyed again, or after this COPY
  // settled, and an 'error' event with no listener left ends the process
  const refused = new Promise<never>((_, reject) => stream.on('error', reject));
  refused.catch(() => undefined);
  const finished = new Promise<void>((resolve) => stream.once('finish', resolve));
  // A refusal while the rows are being written destroys the stream (refused).
  await Promise.race([refused, new Promise<void>((resolve) => stream.write(rows, () => resolve()))]);
  stream.end();
  // The stream hands its end to the connection on the next tick. postgres.js settles neither the
  // stream nor its query when the server refuses the rows after that: the next statement is what
  // fails then, in the aborted transaction, so one follows the COPY at once (a statement issued
  // while the COPY is open would be refused by postgres.js).
  await new Promise<void>((resolve) => setImmediate(resolve));
  const following = after();
  following.catch(() => undefined);
  const [, value] = await Promise.race([refused, Promise.all([finished, following])]);
  return value;
}
