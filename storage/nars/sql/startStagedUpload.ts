import type { ISql } from 'postgres';
import { toStagedUpload, type StagedUploadColumns, type StagedUploadRow } from './stagedUploadRow.js';

/** The upload's row, created empty when there is none; an existing row is returned unchanged. */
export async function startStagedUpload(sql: ISql, cacheId: string, uploadKey: string, compression: string): Promise<StagedUploadRow> {
  const [row] = await sql<StagedUploadColumns[]>`
    insert into staged_uploads (cache_id, upload_key, compression)
    values (${cacheId}, ${uploadKey}, ${compression})
    on conflict (cache_id, upload_key) do update set upload_key = excluded.upload_key
    returning cache_id, upload_key, compression, bytes_staged, created_at, updated_at`;
  return toStagedUpload(row!);
}
