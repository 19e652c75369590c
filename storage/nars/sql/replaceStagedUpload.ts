import type { ISql } from 'postgres';

/** A whole file staged in one request (nix copy's NAR PUT): the row says so, replacing any earlier one. */
export async function replaceStagedUpload(sql: ISql, cacheId: string, uploadKey: string, compression: string, bytes: number): Promise<void> {
  await sql`
    insert into staged_uploads (cache_id, upload_key, compression, bytes_staged)
    values (${cacheId}, ${uploadKey}, ${compression}, ${bytes})
    on conflict (cache_id, upload_key) do update
      set compression = excluded.compression, bytes_staged = excluded.bytes_staged, narinfo = null, updated_at = now()`;
}
