// One query on the NAR tables: lists the keys of every staged upload.
import type { ISql } from 'postgres';

/** Every staged upload's key: the sweeper keeps the files and frames these rows still count on. */
export async function listStagedUploadKeys(sql: ISql): Promise<{ cacheId: string; uploadKey: string; createdAt: Date }[]> {
  const rows = await sql<{ cache_id: string; upload_key: string; created_at: Date }[]>`select cache_id, upload_key, created_at from staged_uploads`;
  return rows.map((r) => ({ cacheId: r.cache_id, uploadKey: r.upload_key, createdAt: r.created_at }));
}
