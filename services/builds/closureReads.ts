// The two ways a build-time closure is read for buildTimeClosures.ts. By number (migration 0081,
// derivationNumbers.ts): the walk follows derivation_graph, one row per node holding its inputs'
// numbers and its recorded size, so the closure comes back as numbers with nothing joined or read
// twice (at 50,000 derivations about the bare walk's cost). By edges: the walk over
// derivation_edges and the edges read again and numbered in SQL, for a closure that reaches a
// derivation without a graph row (written outside the recorder and direct builds, or collected).
import type { Sql } from 'postgres';
import { uuidList, wholeNumbers } from './closureArrays.js';
import { dependencyLists } from './closureRanking.js';

/** A closure as arrays: node i's recorded size (0 when unknown) and what it depends on (CSR). */
export interface ClosureRead {
  sizes: Float64Array;
  offsets: Int32Array;
  deps: Int32Array;
  /** the roots' positions, in the roots' order (a root without a row is left out) */
  roots: number[];
  /** the derivation ids of the nodes at `indexes`; undefined when one is gone meanwhile */
  ids(indexes: readonly number[]): Promise<string[] | undefined>;
}

/** What a kept view must still match: the closure's node count and its recorded sizes. */
export interface ClosureState {
  node_count: number;
  sized_count: number;
  total_size: string;
}

const numberedWalk = (sql: Sql, roots: readonly string[]) => sql`
  with recursive closure(num) as (
    select d.num from derivations d where d.id = any(${roots as string[]}::uuid[])
    union
    select unnest(g.deps) from closure c join derivation_graph g on g.num = c.num
  )`;

const edgeWalk = (sql: Sql, roots: readonly string[]) => sql`
  with recursive closure(id) as (
    select unnest(${roots as string[]}::uuid[])
    union
    select e.depends_on from derivation_edges e join closure c on e.derivation_id = c.id
  )`;

/** The closure's state; `byEdges` when a node has no graph row (the caller may repair: derivationNumbers.ts). */
export async function closureState(sql: Sql, roots: readonly string[]): Promise<ClosureState & { byEdges: boolean }> {
  const [numbered] = await sql<(ClosureState & { missing: number })[]>`
    ${numberedWalk(sql, roots)}
    select count(*)::int as node_count, (count(*) - count(g.num))::int as missing, count(g.output_nar_size)::int as sized_count,
      coalesce(sum(g.output_nar_size), 0)::text as total_size
    from closure c left join derivation_graph g on g.num = c.num`;
  if (numbered!.missing === 0) return { node_count: numbered!.node_count, sized_count: numbered!.sized_count, total_size: numbered!.total_size, byEdges: false };
  const [row] = await sql<ClosureState[]>`
    ${edgeWalk(sql, roots)}
    select count(*)::int as node_count, count(d.output_nar_size)::int as sized_count, coalesce(sum(d.output_nar_size), 0)::text as total_size
    from closure c join derivations d on d.id = c.id`;
  return { ...row!, byEdges: true };
}

/** The closure by number, in one query (arrays read as bytes: closureArrays.ts); undefined when a node has no graph row. */
export async function readNumbered(sql: Sql, roots: readonly string[]): Promise<ClosureRead | undefined> {
  // Every aggregate reads the same rows in the same order; a node's inputs are `degrees` long in `deps`.
  const [row] = await sql`
    ${numberedWalk(sql, roots)}
    select count(*) - count(g.num) as missing,
      coalesce(array_agg(g.num), '{}') as nums,
      coalesce(array_agg(coalesce(g.output_nar_size, 0)), '{}') as sizes,
      coalesce(array_agg(cardinality(g.deps)), '{}') as degrees,
      '{' || coalesce(string_agg(array_to_string(g.deps, ','), ',') filter (where cardinality(g.deps) > 0), '') || '}' as deps,
      (select coalesce(array_agg(d.num order by r.k), '{}') from unnest(${roots as string[]}::uuid[]) with ordinality r(id, k)
       join derivations d on d.id = r.id) as roots
    from closure c left join derivation_graph g on g.num = c.num`.raw();
  const [missing, numText, sizeText, degreeText, depText, rootText] = row as unknown as Buffer[];
  if (missing!.toString() !== '0') return undefined;
  const nums = wholeNumbers(numText!);
  const degrees = wholeNumbers(degreeText!);
  const depNums = wholeNumbers(depText!);
  const n = nums.length;
  const position = new Map<number, number>();
  for (let i = 0; i < n; i++) position.set(nums[i]!, i);
  const offsets = new Int32Array(n + 1);
  for (let i = 0; i < n; i++) offsets[i + 1] = offsets[i]! + degrees[i]!;
  const deps = new Int32Array(depNums.length);
  for (let k = 0; k < depNums.length; k++) {
    const at = position.get(depNums[k]!);
    // every input's number was walked, and every walked number has a row (missing is 0)
    if (at === undefined) throw new Error('a closure input outside the closure');
    deps[k] = at;
  }
  const rootPositions = Array.from(wholeNumbers(rootText!), (num) => position.get(num)).filter((i): i is number => i !== undefined);
  return {
    sizes: wholeNumbers(sizeText!), offsets, deps, roots: rootPositions,
    async ids(indexes) {
      const wanted = indexes.map((i) => nums[i]!);
      const rows = await sql<{ num: string; id: string }[]>`
        select num::text, derivation_id::text as id from derivation_graph where num = any(${wanted}::bigint[])`;
      const byNum = new Map(rows.map((r) => [Number(r.num), r.id]));
      const ids = wanted.map((num) => byNum.get(num));
      return ids.every((id) => id !== undefined) ? (ids as string[]) : undefined;
    },
  };
}

/** The closure by edges: ids, recorded sizes, and the edges as positions in ids, in one query. */
export async function readByEdges(sql: Sql, roots: readonly string[]): Promise<ClosureRead> {
  const [closure] = await sql`
    with nodes as materialized (
      select c.id, coalesce(d.output_nar_size, 0) as size, (row_number() over () - 1)::int as idx
      from (${edgeWalk(sql, roots)} select id from closure) c join derivations d on d.id = c.id
    )
    select
      (select coalesce(array_agg(id order by idx), '{}') from nodes) as ids,
      (select coalesce(array_agg(size order by idx), '{}') from nodes) as sizes,
      coalesce(array_agg(s.idx), '{}') as sources, coalesce(array_agg(t.idx), '{}') as targets
    from nodes t join derivation_edges e on e.derivation_id = t.id join nodes s on s.id = e.depends_on`.raw();
  const [idText, sizeText, sourceText, targetText] = closure as unknown as [Buffer, Buffer, Buffer, Buffer];
  const ids = uuidList(idText);
  const sizes = wholeNumbers(sizeText);
  const { offsets, deps } = dependencyLists(ids.length, wholeNumbers(sourceText), wholeNumbers(targetText));
  return { sizes, offsets, deps, roots: positions(ids, roots), ids: async (indexes) => indexes.map((i) => ids.at(i)) };
}

/** Where each of `roots` is among the `ids` (one scan; a root not there is left out). */
function positions(ids: ReturnType<typeof uuidList>, roots: readonly string[]): number[] {
  const wanted = new Map(roots.map((r) => [r, -1]));
  for (let i = 0; i < ids.length; i++) {
    const id = ids.at(i);
    if (wanted.has(id)) wanted.set(id, i);
  }
  return roots.map((r) => wanted.get(r)!).filter((i) => i >= 0);
}
