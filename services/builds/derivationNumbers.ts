// The numbered derivation graph (migration 0081; docs/builds.md, "How the build-time view is
// computed"): a derivation_graph row per derivation holds its number (derivations.num, the
// server's own, never shown) and its inputs' numbers, so a closure walk returns numbers and reads
// one row per node. The rows are written with the derivation's edges and must say the same:
// graphRecorder.ts writes them from the numbers it already holds; writers that insert edges by
// statement (direct builds, and tests and benches that seed graphs) number them from the edges.
import type { ISql, Sql } from 'postgres';

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

/**
 * The rows of `ids` (derivation uuids) from their edges as they are now: a missing row is inserted
 * with the recorded size; a row whose inputs differ gets the edges' and keeps its size (the
 * completion trigger owns it: a size read here could be older than the trigger's); an unchanged
 * row is neither written nor locked. In number order, so two writers wait instead of deadlocking.
 * A caller that may race a completion share-locks the builds first (numberRecorded).
 */
export function numberFromEdges(sql: ISql, ids: readonly string[]) {
  return sql`
    insert into derivation_graph (num, derivation_id, deps, output_nar_size)
    select d.num, d.id, x.deps, d.output_nar_size
    from derivations d
    cross join lateral (select array(select i.num from derivation_edges e join derivations i on i.id = e.depends_on where e.derivation_id = d.id) as deps) x
    left join derivation_graph g on g.num = d.num
    where d.id = any(${ids as string[]}::uuid[]) and (g.num is null or not (g.deps @> x.deps and x.deps @> g.deps))
    order by d.num
    on conflict (num) do update set deps = excluded.deps
    where not (derivation_graph.deps @> excluded.deps and excluded.deps @> derivation_graph.deps)`;
}

/**
 * The graph rows of a closure recorded by statement (direct builds), last in the transaction, after
 * every lock of derivation_builds (a completion locks its build, then the derivation, then the
 * graph row): the rows of the derivations this transaction `inserted`, and of those recorded before
 * that `gained` edges or have no row (written by a server older than 0081). The builds of the
 * latter are share-locked first (in id order, as every lock of derivation_builds): a completion
 * updates its build before its trigger writes the size, so the size read after this lock is the
 * newest, and a completion after it waits for this transaction and then finds the row.
 */
export async function numberRecorded(tx: ISql, ids: readonly string[], inserted: ReadonlySet<string>, gained: ReadonlySet<string>): Promise<void> {
  const before = ids.filter((id) => !inserted.has(id));
  const unnumbered = before.length === 0 ? [] : await tx<{ id: string }[]>`
    select d.id from derivations d where d.id = any(${before}::uuid[])
      and not exists (select 1 from derivation_graph g where g.num = d.num)`;
  const repaired = [...new Set([...gained, ...unnumbered.map((r) => r.id)])].filter((id) => !inserted.has(id));
  if (repaired.length > 0) await tx`select 1 from derivation_builds where derivation_id = any(${repaired}::uuid[]) order by id for share`;
  const numbered = [...inserted, ...repaired];
  if (numbered.length > 0) await numberFromEdges(tx, numbered);
}

/**
 * After a closure view fell back to the edges (closureReads.ts): the rows of the closure's
 * derivations that have none, and of those whose inputs name a number without a row (an input
 * collected while they kept it), written from the edges as numberRecorded writes them, so the
 * next view of any closure through them is read by number again. The derivations that have no row
 * are found by a walk over the edges and a probe per input number: the cost of one fallback view.
 */
export async function repairNumbers(sql: Sql, roots: readonly string[]): Promise<number> {
  return sql.begin(async (tx) => {
    // A repair waits for no one long: the builds it share-locks are other tenants' dispatches' too.
    await tx`set local lock_timeout = '200ms'`;
    const stale = await tx<{ id: string }[]>`
      with recursive closure(id) as (
        select unnest(${roots as string[]}::uuid[])
        union
        select e.depends_on from derivation_edges e join closure c on e.derivation_id = c.id
      )
      select d.id from closure c join derivations d on d.id = c.id left join derivation_graph g on g.num = d.num
      where g.num is null or exists (select 1 from unnest(g.deps) n where not exists (select 1 from derivation_graph h where h.num = n))`;
    const ids = stale.map((r) => r.id);
    if (ids.length === 0) return 0;
    await tx`select 1 from derivation_builds where derivation_id = any(${ids}::uuid[]) order by id for share`;
    await numberFromEdges(tx, ids);
    return ids.length;
  });
}
