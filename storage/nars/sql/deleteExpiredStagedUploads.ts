// One query on the NAR tables: deletes staged uploads older than the partial TTL.
import type { ISql } from 'postgres';
import { leaseLostCondition } from '../../db/index.js';

/**
 * Forgets staged uploads not written to since `olderThan`, except those a live process is working
 * on right now (claimStagedUpload); their keys, for removing the files.
 */
export async function deleteExpiredStagedUploads(sql: ISql, olderThan: Date): Promise<{ cacheId: string; uploadKey: string; createdAt: Date }[]> {
  const rows = await sql<{ cache_id: string; upload_key: string; created_at: Date }[]>`
    delete from staged_uploads s
    where s.updated_at < ${olderThan} and (s.writer is null or ${leaseLostCondition(sql, sql`s.writer`)})
    returning s.cache_id, s.upload_key, s.created_at`;
  return rows.map((r) => ({ cacheId: r.cache_id, uploadKey: r.upload_key, createdAt: r.created_at }));
}
