// One query on the NAR tables: tells whether any cached path points to a NAR file.
import type { ISql } from 'postgres';

/** Whether any cached path points at the blob of this file hash. */
export async function fileIsReferenced(sql: ISql, fileHash: string): Promise<boolean> {
  const [row] = await sql<{ found: boolean }[]>`select exists (select 1 from cached_paths where file_hash = ${fileHash}) as found`;
  return row?.found === true;
}
