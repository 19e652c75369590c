// One query on the NAR tables: claims a staged upload for one writer.
import type { ISql } from 'postgres';
import { leaseLostCondition } from '../../db/index.js';
import { toStagedUpload, type StagedUploadColumns, type StagedUploadRow } from './stagedUploadRow.js';

/**
 * Makes the process whose instance lease key is `writer` the one working on the upload, if the
 * upload is free, already its own, or held by a process whose lease is gone (it died): the row
 * and whether it is now claimed; null when there is no such upload. A refused claim changes nothing.
 */
export async function claimStagedUpload(sql: ISql, cacheId: string, uploadKey: string, writer: number): Promise<{ row: StagedUploadRow; claimed: boolean } | null> {
  const [found] = await sql<(StagedUploadColumns & { claimed: boolean })[]>`
    with claimed as (
      update staged_uploads s set writer = ${writer}
      where s.cache_id = ${cacheId} and s.upload_key = ${uploadKey}
        and (s.writer is null or s.writer = ${writer} or ${leaseLostCondition(sql, sql`s.writer`)})
      returning s.cache_id, s.upload_key, s.compression, s.bytes_staged, s.created_at, s.updated_at)
    select cache_id, upload_key, compression, bytes_staged, created_at, updated_at, true as claimed from claimed
    union all
    select cache_id, upload_key, compression, bytes_staged, created_at, updated_at, false as claimed from staged_uploads
    where cache_id = ${cacheId} and upload_key = ${uploadKey} and not exists (select from claimed)`;
  return found ? { row: toStagedUpload(found), claimed: found.claimed } : null;
}
