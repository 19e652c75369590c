// One query on the NAR tables: moves a staged upload's offset forward.
import type { ISql } from 'postgres';

/**
 * Records that the staged file now counts `to` bytes, if it still counted `from`: false when
 * another request moved it meanwhile (the caller's bytes past `from` then do not count).
 */
export async function advanceStagedUpload(sql: ISql, cacheId: string, uploadKey: string, from: number, to: number): Promise<boolean> {
  const rows = await sql`
    update staged_uploads set bytes_staged = ${to}, updated_at = now()
    where cache_id = ${cacheId} and upload_key = ${uploadKey} and bytes_staged = ${from}`;
  return rows.count === 1;
}
