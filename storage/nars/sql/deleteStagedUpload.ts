// One query on the NAR tables: deletes a staged upload's row.
import type { ISql } from 'postgres';

/** Forgets a staged upload; true when there was one. The caller removes its file afterwards. */
export async function deleteStagedUpload(sql: ISql, cacheId: string, uploadKey: string): Promise<boolean> {
  const rows = await sql`delete from staged_uploads where cache_id = ${cacheId} and upload_key = ${uploadKey}`;
  return rows.count === 1;
}
