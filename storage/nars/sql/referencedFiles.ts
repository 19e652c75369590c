// One query on the NAR tables: finds which NAR files cached paths still point to.
import type { ISql } from 'postgres';

/** Which of `fileHashes` some cached path points at. */
export async function referencedFiles(sql: ISql, fileHashes: string[]): Promise<Set<string>> {
  if (fileHashes.length === 0) return new Set();
  const rows = await sql<{ file_hash: string }[]>`
    select distinct file_hash from cached_paths where file_hash = any(${fileHashes}::text[])`;
  return new Set(rows.map((r) => r.file_hash));
}
