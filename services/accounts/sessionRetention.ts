// retentionDays for sessions (spec: "expired sessions"): a session row is kept retentionDays after it
// expired or was revoked (logout), then deleted; a live session is never touched. Its token stops
// working at expiry or revocation either way (sessions.ts checks both); the row only remembers it.
import type { Sql } from 'postgres';
import { deleteInSlices, retentionCutoff } from '../../storage/index.js';

/** Deletes sessions that ended more than `retentionDays` before `now`, in slices; how many. 0 keeps everything. */
export async function deleteExpiredSessions(sql: Sql, retentionDays: number, now: Date): Promise<number> {
  const before = retentionCutoff(retentionDays, now);
  if (before === null) return 0;
  return deleteInSlices(async (limit) => (await sql`
      delete from sessions where id in (
        select id from sessions where expires_at < ${before} or revoked_at < ${before} limit ${limit})
      returning 1`).length);
}
