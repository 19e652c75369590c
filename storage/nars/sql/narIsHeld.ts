// One query on the NAR tables: tells whether any cache holds a path with this NAR hash.
import type { ISql } from 'postgres';

/** Whether some cache holds this NAR of the store path, under whatever narinfo (migration 0017). */
export async function narIsHeld(sql: ISql, hashPart: string, narHash: string): Promise<boolean> {
  const [row] = await sql<{ held: boolean }[]>`
    select exists (
      select 1 from path_signatures s join cached_paths p on p.id = s.cached_path_id
      where s.hash_part = ${hashPart} and p.hash_part = ${hashPart} and p.nar_hash = ${narHash}) as held`;
  return row?.held === true;
}
