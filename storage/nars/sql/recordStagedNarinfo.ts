// One query on the NAR tables: records the narinfo of a staged upload.
import type { ISql } from 'postgres';

/** Keeps the narinfo of a finalize attempt beside the staged bytes (operators see why it failed). */
export async function recordStagedNarinfo(sql: ISql, cacheId: string, uploadKey: string, narinfo: unknown): Promise<void> {
  await sql`
    update staged_uploads set narinfo = ${sql.json(narinfo as Parameters<typeof sql.json>[0])}, updated_at = now()
    where cache_id = ${cacheId} and upload_key = ${uploadKey}`;
}
