// One query on the NAR tables: creates a staged upload's row.
import type { ISql } from 'postgres';
import { leaseLostCondition } from '../../db/index.js';
import { toStagedUpload, type StagedUploadColumns, type StagedUploadRow } from './stagedUploadRow.js';

/**
 * The upload's row, created empty when there is none, and claimed for `writer` (as
 * claimStagedUpload) in the same statement; an existing row is returned otherwise unchanged.
 * Null when another live process holds the upload.
 */
export async function startStagedUpload(sql: ISql, cacheId: string, uploadKey: string, compression: string, writer: number): Promise<StagedUploadRow | null> {
  const [row] = await sql<StagedUploadColumns[]>`
    insert into staged_uploads as s (cache_id, upload_key, compression, writer)
    values (${cacheId}, ${uploadKey}, ${compression}, ${writer})
    on conflict (cache_id, upload_key) do update set writer = excluded.writer
      where s.writer is null or s.writer = excluded.writer or ${leaseLostCondition(sql, sql`s.writer`)}
    returning cache_id, upload_key, compression, bytes_staged, created_at, updated_at`;
  return row ? toStagedUpload(row) : null;
}
