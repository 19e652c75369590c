import type { ISql } from 'postgres';

/** Forgets staged uploads not written to since `olderThan`; their keys, for removing the files. */
export async function deleteExpiredStagedUploads(sql: ISql, olderThan: Date): Promise<{ cacheId: string; uploadKey: string; createdAt: Date }[]> {
  const rows = await sql<{ cache_id: string; upload_key: string; created_at: Date }[]>`
    delete from staged_uploads where updated_at < ${olderThan} returning cache_id, upload_key, created_at`;
  return rows.map((r) => ({ cacheId: r.cache_id, uploadKey: r.upload_key, createdAt: r.created_at }));
}
