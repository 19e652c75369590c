// The cluster_jobs rows (migration 0070; docs/builds.md, "Cluster jobs"): one per placement attempt
// of a build that needs several workers at once. Every move is guarded by the state it leaves, and
// the partial unique index admits one active row per build, so two server processes never place the
// same cluster job.
import type { Sql } from 'postgres';
import { deleteInSlices, retentionCutoff } from '../../storage/index.js';

export type ClusterJobState = 'reserved' | 'preparing' | 'running' | 'finished' | 'aborted' | 'expired';
const ENDED: readonly ClusterJobState[] = ['finished', 'aborted', 'expired'];

export interface NewClusterJob {
  id: string;
  derivationBuildId: string;
  state: 'reserved' | 'preparing';
  zone: string | null;
  members: readonly string[];
  deadline: Date;
}

/** Inserts the attempt unless the build has an active one (another process's): whether it did. */
export async function insertClusterJob(sql: Sql, row: NewClusterJob, now: Date): Promise<boolean> {
  const inserted = await sql`
    insert into cluster_jobs (id, derivation_build_id, state, zone, members, created_at, deadline)
    values (${row.id}, ${row.derivationBuildId}, ${row.state}, ${row.zone}, ${row.members as string[]}::uuid[], ${now}, ${row.deadline})
    on conflict (derivation_build_id) where state in ('reserved', 'preparing', 'running') do nothing
    returning 1`;
  return inserted.length === 1;
}

/** Moves the attempt from one of `from` to `to`: false when it was not in `from` any more. */
export async function moveClusterJob(sql: Sql, id: string, from: readonly ClusterJobState[], to: ClusterJobState,
  at: { now: Date; deadline?: Date | null; reason?: string }): Promise<boolean> {
  const ended = ENDED.includes(to);
  const moved = await sql`
    update cluster_jobs set state = ${to}, deadline = ${at.deadline ?? null}, finished_at = ${ended ? at.now : null},
      reason = coalesce(${at.reason ?? null}, reason)
    where id = ${id} and state = any(${from as string[]}) returning 1`;
  return moved.length === 1;
}

/**
 * Attempts whose process is gone: a reservation or preparation a minute past its deadline (a live
 * process ends its own at the deadline) and running attempts whose build is no longer started.
 */
export async function endStaleClusterJobs(sql: Sql, now: Date): Promise<number> {
  const stale = new Date(now.getTime() - 60_000);
  const ended = await sql`
    update cluster_jobs c set state = case c.state when 'reserved' then 'expired' when 'preparing' then 'aborted' else 'finished' end,
      finished_at = ${now}, deadline = null, reason = coalesce(c.reason, 'the server process that placed it is gone')
    where (c.state in ('reserved', 'preparing') and c.deadline < ${stale})
       or (c.state = 'running' and not exists (select 1 from derivation_builds db where db.id = c.derivation_build_id and db.status = 'started'))
    returning 1`;
  return ended.length;
}

/** retentionDays: finished attempts older than the cutoff; active ones stay. */
export async function deleteOldClusterJobs(sql: Sql, retentionDays: number, now: Date): Promise<number> {
  const before = retentionCutoff(retentionDays, now);
  if (before === null) return 0;
  return deleteInSlices(async (limit) => (await sql`
    delete from cluster_jobs where id in (select id from cluster_jobs where finished_at < ${before} limit ${limit}) returning 1`).length);
}
