// One query on the NAR tables: finds a staged upload.
import type { ISql } from 'postgres';
import { toStagedUpload, type StagedUploadColumns, type StagedUploadRow } from './stagedUploadRow.js';

export async function findStagedUpload(sql: ISql, cacheId: string, uploadKey: string): Promise<StagedUploadRow | null> {
  const [row] = await sql<StagedUploadColumns[]>`
    select cache_id, upload_key, compression, bytes_staged, created_at, updated_at
    from staged_uploads where cache_id = ${cacheId} and upload_key = ${uploadKey}`;
  return row ? toStagedUpload(row) : null;
}
