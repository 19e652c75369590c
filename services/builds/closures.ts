// ClosureGraph (spec: Resources, Limits "Closure nodes") of one build or of an evaluation's entry
// points. The build-time closure (derivation_edges; node ids are derivation UUIDs) comes from
// precomputed data in buildTimeClosures.ts. The runtime closure follows the references of the
// outputs' cached paths in the project's caches (node ids are store-path hash parts), which change
// with every upload and collection: PostgreSQL walks it per request (a recursive CTE into temporary
// tables), and the largest CLOSURE_NODE_LIMIT nodes by accumulated closure size are picked in
// closureRanking.ts and shown with the edges between them. Counts and total_size_bytes are of the
// whole closure.
import type { Sql, TransactionSql } from 'postgres';
import { storePathHashPart } from '../../protocol/index.js';
import type { BuildViewsService } from './buildViews.js';
import type { EvaluationsService } from './evaluations.js';
import type { Principal } from '../access/index.js';
import { dependencyLists, largestClosures } from './closureRanking.js';
import { CLOSURE_NODE_LIMIT, type ClosureGraph } from './closureGraph.js';
import { buildTimeClosures } from './buildTimeClosures.js';
import { projectCaches } from '../caches/index.js';

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

/** Runtime closure: counts, the exact total, and the largest nodes by accumulated closure size with their edges. */
async function runtimeGraphOf(tx: TransactionSql, roots: string[]): Promise<ClosureGraph> {
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
  const { offsets, deps } = dependencyLists(rows.length, sources, targets);
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
  const buildTime = buildTimeClosures(sql);
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
    const [caches, roots] = await Promise.all([cacheIds(projectId), rootsOf(where)]);
    if (!runtime) {
      const key = 'build' in where ? { derivation: roots.derivations[0]! } : { evaluation: where.evaluation };
      if (roots.derivations.length === 0) return { roots: [], total_size_bytes: 0, node_count: 0, edge_count: 0, truncated: false, nodes: [], edges: [] };
      return buildTime.graph(key, roots.derivations, caches);
    }
    return sql.begin(async (tx) => {
      await runtimeClosure(tx, roots.outputs, caches);
      return runtimeGraphOf(tx, roots.outputs.map(storePathHashPart));
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
