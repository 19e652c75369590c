// One query on the NAR tables: starts a staged upload over.
import type { ISql } from 'postgres';
import { leaseLostCondition } from '../../db/index.js';

/**
 * A whole file staged in one request (nix copy's NAR PUT): the row says so, replacing any earlier
 * one, claimed for `writer` in the same statement. False (nothing changed) when another live
 * process holds the upload.
 */
export async function replaceStagedUpload(sql: ISql, cacheId: string, uploadKey: string, compression: string, bytes: number, writer: number): Promise<boolean> {
  const rows = await sql`
    insert into staged_uploads as s (cache_id, upload_key, compression, bytes_staged, writer)
    values (${cacheId}, ${uploadKey}, ${compression}, ${bytes}, ${writer})
    on conflict (cache_id, upload_key) do update
      set compression = excluded.compression, bytes_staged = excluded.bytes_staged, narinfo = null, updated_at = now(), writer = excluded.writer
      where s.writer is null or s.writer = excluded.writer or ${leaseLostCondition(sql, sql`s.writer`)}`;
  return rows.count === 1;
}
