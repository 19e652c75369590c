// One query on the NAR tables: releases a writer's claim on a staged upload.
import type { ISql } from 'postgres';

/** Gives up `writer`'s claim on the upload (claimStagedUpload); nothing when it holds none (or the row is gone). */
export async function releaseStagedUpload(sql: ISql, cacheId: string, uploadKey: string, writer: number): Promise<void> {
  await sql`
    update staged_uploads set writer = null
    where cache_id = ${cacheId} and upload_key = ${uploadKey} and writer = ${writer}`;
}
