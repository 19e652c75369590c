// The numbered derivation graph (migration 0081; docs/builds.md, "How the build-time view is
// computed"): a derivation_graph row per derivation holds its number (derivations.num, the
// server's own, never shown) and its inputs' numbers, so a closure walk returns numbers and reads
// one row per node. The rows are written with the derivation's edges and must say the same:
// graphRecorder.ts writes them from the numbers it already holds; writers that insert edges by
// statement (direct builds, and tests and benches that seed graphs) number them from the edges.
import type { ISql } from 'postgres';

/** A derivation just inserted, its number and its inputs' numbers (bigint as postgres.js returns it: text). */
export interface GraphRow {
  num: string;
  id: string;
  deps: readonly string[];
}

/** The rows of derivations this transaction inserted, in one statement (no size yet: their builds are new). */
export function insertGraphRows(tx: ISql, rows: readonly GraphRow[]) {
  return tx`
    insert into derivation_graph (num, derivation_id, deps)
    select r.num, r.id, r.deps::bigint[]
    from unnest(${rows.map((r) => r.num)}::bigint[], ${rows.map((r) => r.id)}::uuid[], ${rows.map((r) => `{${r.deps.join(',')}}`)}::text[]) r(num, id, deps)`;
}

/** The rows of `ids` (derivation uuids) from their edges as they are now, written again if they exist. */
export function numberFromEdges(sql: ISql, ids: readonly string[]) {
  return sql`
    insert into derivation_graph (num, derivation_id, deps, output_nar_size)
    select d.num, d.id, array(select i.num from derivation_edges e join derivations i on i.id = e.depends_on where e.derivation_id = d.id), d.output_nar_size
    from derivations d where d.id = any(${ids as string[]}::uuid[])
    on conflict (num) do update set deps = excluded.deps, output_nar_size = excluded.output_nar_size`;
}
