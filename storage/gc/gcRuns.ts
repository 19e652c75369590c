// The record of collection passes and deep rounds (gc_runs, migration 0020): what a superuser
// requested, what runs, what the last ones found. Only the holder of the collector's lock starts runs.
import type { ISql } from 'postgres';
import { deleteInSlices } from '../db/index.js';

export type GcRunKind = 'pass' | 'deep';
export type GcRunState = 'requested' | 'running' | 'finished' | 'failed';

export interface GcRunRow {
  id: string;
  kind: GcRunKind;
  state: GcRunState;
  requested_by: string | null;
  requested_at: Date | null;
  started_at: Date | null;
  finished_at: Date | null;
  result: Record<string, unknown> | null;
  error: string | null;
}

const columns = (sql: ISql) => sql`id, kind, state, requested_by, requested_at, started_at, finished_at, result, error`;

/** A request for a run now; an open request of the same kind is answered instead of adding another. */
export async function requestGcRun(sql: ISql, kind: GcRunKind, requestedBy: string | null, now: Date): Promise<GcRunRow> {
  const [open] = await sql<GcRunRow[]>`select ${columns(sql)} from gc_runs where kind = ${kind} and state = 'requested' order by id limit 1`;
  if (open) return open;
  const [row] = await sql<GcRunRow[]>`
    insert into gc_runs (kind, requested_by, requested_at) values (${kind}, ${requestedBy}, ${now}) returning ${columns(sql)}`;
  return row!;
}

/** The oldest open request of a kind, or null. */
export async function pendingGcRequest(sql: ISql, kind: GcRunKind): Promise<GcRunRow | null> {
  const [row] = await sql<GcRunRow[]>`select ${columns(sql)} from gc_runs where kind = ${kind} and state = 'requested' order by id limit 1`;
  return row ?? null;
}

/** Starts a run: the request's row, or a new row for a scheduled run. */
export async function startGcRun(sql: ISql, kind: GcRunKind, requestId: string | null, now: Date): Promise<string> {
  if (requestId !== null) {
    await sql`update gc_runs set state = 'running', started_at = ${now} where id = ${requestId}`;
    return requestId;
  }
  const [row] = await sql<{ id: string }[]>`insert into gc_runs (kind, state, started_at) values (${kind}, 'running', ${now}) returning id`;
  return row!.id;
}

export async function finishGcRun(sql: ISql, id: string, now: Date, result: Record<string, unknown>): Promise<void> {
  await sql`update gc_runs set state = 'finished', finished_at = ${now}, result = ${sql.json(result as never)} where id = ${id}`;
}

export async function failGcRun(sql: ISql, id: string, now: Date, error: string): Promise<void> {
  await sql`update gc_runs set state = 'failed', finished_at = ${now}, error = ${error.slice(0, 20000)} where id = ${id}`;
}

/**
 * Runs left 'running' by a process that died holding the lock (kill -9): failed, so the new
 * holder's schedule counts from them and their rows do not read as running forever.
 */
export async function failInterruptedGcRuns(sql: ISql, now: Date): Promise<number> {
  const rows = await sql`update gc_runs set state = 'failed', finished_at = ${now}, error = 'interrupted: the process running it stopped' where state = 'running'`;
  return rows.count;
}

/** When the last run of a kind ended (finished or failed), or null. */
export async function lastGcRunEnd(sql: ISql, kind: GcRunKind): Promise<Date | null> {
  const [row] = await sql<{ finished_at: Date | null }[]>`select max(finished_at) as finished_at from gc_runs where kind = ${kind}`;
  return row?.finished_at ?? null;
}

export async function findGcRun(sql: ISql, id: string): Promise<GcRunRow | null> {
  if (!/^[0-9]{1,18}$/.test(id)) return null;
  const [row] = await sql<GcRunRow[]>`select ${columns(sql)} from gc_runs where id = ${id}`;
  return row ?? null;
}

/** The newest runs, newest first. */
export async function recentGcRuns(sql: ISql, limit: number): Promise<GcRunRow[]> {
  return sql<GcRunRow[]>`select ${columns(sql)} from gc_runs order by id desc limit ${limit}`;
}

/**
 * retentionDays for the collector's record ("finished admin tasks"): runs that ended before
 * `before` go, in slices, except the newest ended run of each kind, which the schedule counts
 * from (lastGcRunEnd) and GET /admin/gc shows. Requested and running rows are never touched.
 */
export async function deleteOldGcRuns(sql: ISql, before: Date): Promise<number> {
  return deleteInSlices(async (limit) => (await sql`
      delete from gc_runs where id in (
        select r.id from gc_runs r
        where r.state in ('finished', 'failed') and r.finished_at < ${before}
          and r.id <> (select n.id from gc_runs n where n.kind = r.kind and n.state in ('finished', 'failed') order by n.finished_at desc, n.id desc limit 1)
        limit ${limit})
      returning 1`).length);
}
