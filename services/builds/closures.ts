// ClosureGraph (spec: Resources, Limits "Closure nodes"): the build-time closure follows
// derivation_edges (node ids are derivation UUIDs); the runtime closure follows the references
// of the outputs' cached paths in the project's caches (node ids are store-path hash parts).
// PostgreSQL walks the closure (a recursive CTE into temporary tables, sizes joined from the
// cached paths); the largest CLOSURE_NODE_LIMIT nodes by accumulated closure size are picked in
// closureRanking.ts and shown with the edges between them. Counts and total_size_bytes are of
// the whole closure.
import type { Sql, TransactionSql } from 'postgres';
import { storePathHashPart } from '../../protocol/index.js';
import type { BuildViewsService } from './buildViews.js';
import type { EvaluationsService } from './evaluations.js';
import type { Principal } from '../access/index.js';
import { largestClosures } from './closureRanking.js';
import { projectCaches } from '../caches/index.js';

export const CLOSURE_NODE_LIMIT = 500;

export interface ClosureNode {
  id: string;
  name: string;
  path: string;
  /** bytes of the NAR(s); for a derivation the sum of its cached outputs; null when nothing is cached */
  nar_size: number | null;
  /** accumulated closure size: nar_size of the node and of everything it depends on, each once */
  closure_size: number;
}

export interface ClosureGraph {
  roots: string[];
  total_size_bytes: number;
  node_count: number;
  edge_count: number;
  truncated: boolean;
  nodes: ClosureNode[];
  /** target depends on source */
  edges: { source: string; target: string }[];
}

/** The hash part of a store path, in SQL (a path outside the store gives null). */
const HASH_PART_PATTERN = '/([0-9a-df-np-sv-z]{32})-[^/]*$';

/** Fills closure_nodes and closure_edges with the build-time closure of `roots` (derivation ids). */
async function buildTimeClosure(tx: TransactionSql, roots: string[], caches: string[]): Promise<void> {
  await tx`
    create temporary table closure_ids on commit drop as
    with recursive closure(id) as (
      select unnest(${roots}::uuid[])
      union
      select e.depends_on from derivation_edges e join closure c on e.derivation_id = c.id
    )
    select id from closure`;
  // The outputs' sizes: each output's hash part looked up among the paths the project's caches signed.
  await tx`
    create temporary table closure_nodes on commit drop as
    with outputs as (
      select c.id, substring(o.path from ${HASH_PART_PATTERN}) as hash_part
      from closure_ids c join derivations d on d.id = c.id cross join lateral jsonb_each_text(d.outputs) o(name, path)
    ),
    held as (
      select o.id, sum(s.nar_size) as nar_size from outputs o
      cross join lateral (
        select max(cp.nar_size) as nar_size from path_signatures ps join cached_paths cp on cp.id = ps.cached_path_id
        where ps.cache_id = any(${caches}::uuid[]) and ps.hash_part = o.hash_part
      ) s
      group by o.id
    )
    select d.id::text as id, d.name, d.drv_path as path, held.nar_size::bigint as nar_size
    from closure_ids c join derivations d on d.id = c.id left join held on held.id = c.id`;
  await tx`
    create temporary table closure_edges on commit drop as
    select e.depends_on::text as source, e.derivation_id::text as target
    from closure_ids c join derivation_edges e on e.derivation_id = c.id`;
}

/** Fills closure_nodes and closure_edges with the runtime closure of `roots` (store paths). */
async function runtimeClosure(tx: TransactionSql, roots: string[], caches: string[]): Promise<void> {
  const storeDir = roots[0] ? roots[0].slice(0, roots[0].lastIndexOf('/')) : '/nix/store';
  const bases = roots.map((p) => p.slice(p.lastIndexOf('/') + 1));
  // One cached_paths row per hash part: the oldest one a project cache signed.
  await tx`
    create temporary table closure_held on commit drop as
    with recursive closure(base) as (
      select unnest(${bases}::text[])
      union
      select r.base from closure c
      cross join lateral (
        select cp.refs from path_signatures ps join cached_paths cp on cp.id = ps.cached_path_id
        where ps.cache_id = any(${caches}::uuid[]) and ps.hash_part = left(c.base, 32) order by cp.id limit 1
      ) held
      cross join lateral unnest(held.refs) r(base)
    )
    select c.base, left(c.base, 32) as hash_part, held.nar_size, held.refs from closure c
    left join lateral (
      select cp.nar_size, cp.refs from path_signatures ps join cached_paths cp on cp.id = ps.cached_path_id
      where ps.cache_id = any(${caches}::uuid[]) and ps.hash_part = left(c.base, 32) order by cp.id limit 1
    ) held on true`;
  await tx`
    create temporary table closure_nodes on commit drop as
    select distinct on (hash_part) hash_part as id, substring(base from 34) as name, ${storeDir} || '/' || base as path, nar_size
    from closure_held order by hash_part, nar_size desc nulls last`;
  await tx`
    create temporary table closure_edges on commit drop as
    select distinct left(r.base, 32) as source, h.hash_part as target
    from closure_held h cross join lateral unnest(h.refs) r(base) where left(r.base, 32) <> h.hash_part`;
}

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** Counts, the exact total, and the largest nodes by accumulated closure size with their edges. */
async function graphOf(tx: TransactionSql, roots: string[]): Promise<ClosureGraph> {
  // Nodes are numbered by their place in id order (collate "C", the same in both queries), and the
  // edges come back as two int arrays: for 185,000 edges that is a fraction of text id pairs.
  const rows = await tx<{ id: string; name: string; path: string; nar_size: string | null }[]>`
    select id, name, path, nar_size::text as nar_size from closure_nodes order by id collate "C"`;
  const [pairs] = await tx<{ sources: number[]; targets: number[] }[]>`
    with numbered as (select id, (row_number() over (order by id collate "C") - 1)::int as idx from closure_nodes)
    select coalesce(array_agg(s.idx), '{}') as sources, coalesce(array_agg(t.idx), '{}') as targets
    from closure_edges e join numbered s on s.id = e.source join numbered t on t.id = e.target`;
  const sources = pairs?.sources ?? [];
  const targets = pairs?.targets ?? [];
  const sizes = Float64Array.from(rows, (r) => (r.nar_size === null ? 0 : Number(r.nar_size)));
  // CSR adjacency, node → what it depends on (the edge's source)
  const offsets = new Int32Array(rows.length + 1);
  for (const target of targets) offsets[target + 1] = offsets[target + 1]! + 1;
  for (let i = 0; i < rows.length; i++) offsets[i + 1] = offsets[i + 1]! + offsets[i]!;
  const fill = offsets.slice(0, rows.length);
  const deps = new Int32Array(sources.length);
  for (let k = 0; k < sources.length; k++) {
    const target = targets[k]!;
    deps[fill[target]!] = sources[k]!;
    fill[target] = fill[target]! + 1;
  }
  const position = new Map(rows.map((r, i) => [r.id, i]));
  const rootIndexes = roots.map((r) => position.get(r)).filter((i): i is number => i !== undefined);
  const top = largestClosures({ sizes, offsets, deps, roots: rootIndexes }, CLOSURE_NODE_LIMIT)
    .sort((a, b) => b.size - a.size || compare(rows[a.index]!.id, rows[b.index]!.id));
  const shown = new Uint8Array(rows.length);
  for (const t of top) shown[t.index] = 1;
  const edges: { source: string; target: string }[] = [];
  for (let k = 0; k < sources.length; k++) {
    if (shown[sources[k]!] && shown[targets[k]!]) edges.push({ source: rows[sources[k]!]!.id, target: rows[targets[k]!]!.id });
  }
  return {
    roots,
    total_size_bytes: sizes.reduce((sum, s) => sum + s, 0),
    node_count: rows.length,
    edge_count: sources.length,
    truncated: rows.length > top.length,
    nodes: top.map(({ index: i, size }) => {
      const r = rows[i]!;
      return { id: r.id, name: r.name, path: r.path, nar_size: r.nar_size === null ? null : Number(r.nar_size), closure_size: size };
    }),
    edges: edges.sort((a, b) => compare(a.target, b.target) || compare(a.source, b.source)),
  };
}

export function closuresService(sql: Sql, evaluations: Pick<EvaluationsService, 'visible'>, views: Pick<BuildViewsService, 'build'>) {
  const cacheIds = async (projectId: string) => (await projectCaches(sql, projectId)).map((c) => c.id);

  /** The root derivations and output paths of one build, or of an evaluation's entry points. */
  async function rootsOf(where: { build: string } | { evaluation: string }) {
    const rows = await sql<{ id: string; outputs: Record<string, string | null> }[]>`
      select d.id, d.outputs from builds b join derivation_builds db on db.id = b.derivation_build_id join derivations d on d.id = db.derivation_id
      where ${'build' in where ? sql`b.id = ${where.build}` : sql`b.evaluation_id = ${where.evaluation} and b.entry_point`}
      order by d.drv_path`;
    return {
      derivations: rows.map((r) => r.id),
      outputs: [...new Set(rows.flatMap((r) => Object.values(r.outputs).filter((p): p is string => p !== null)))].sort(),
    };
  }

  async function compute(projectId: string, where: { build: string } | { evaluation: string }, runtime: boolean): Promise<ClosureGraph> {
    const caches = await cacheIds(projectId);
    const roots = await rootsOf(where);
    return sql.begin(async (tx) => {
      if (runtime) {
        await runtimeClosure(tx, roots.outputs, caches);
        return graphOf(tx, roots.outputs.map(storePathHashPart));
      }
      await buildTimeClosure(tx, roots.derivations, caches);
      return graphOf(tx, roots.derivations);
    });
  }

  return {
    async build(who: Principal, buildId: string, runtime: boolean): Promise<ClosureGraph> {
      const found = await views.build(who, buildId);
      const label = await evaluations.visible(who, found.evaluation_id, 'viewProject');
      return compute(label.project_id, { build: buildId }, runtime);
    },

    async evaluation(who: Principal, evaluationId: string, runtime: boolean): Promise<ClosureGraph> {
      const label = await evaluations.visible(who, evaluationId, 'viewProject');
      return compute(label.project_id, { evaluation: evaluationId }, runtime);
    },
  };
}
export type ClosuresService = ReturnType<typeof closuresService>;
