// retentionDays for sessions (spec: "expired sessions"): a session row is kept retentionDays after it
// expired or was revoked (logout), then deleted; a live session is never touched. Its token stops
// working at expiry or revocation either way (sessions.ts checks both); the row only remembers it.
import type { Sql } from 'postgres';

const SLICE = 5000;

/** Deletes sessions that ended more than `retentionDays` before `now`, in slices; how many. 0 keeps everything. */
export async function deleteExpiredSessions(sql: Sql, retentionDays: number, now: Date): Promise<number> {
  if (retentionDays <= 0) return 0;
  const before = new Date(now.getTime() - retentionDays * 86_400_000);
  let deleted = 0;
  for (;;) {
    const rows = await sql`
      delete from sessions where id in (
        select id from sessions where expires_at < ${before} or revoked_at < ${before} limit ${SLICE})
      returning 1`;
    deleted += rows.length;
    if (rows.length < SLICE) return deleted;
  }
}
