// The build-time ClosureGraph from precomputed data (issue 23 item 3, migration 0052): nodes are
// ranked and totalled by the output sizes recorded when builds finished (derivations.output_nar_size),
// and a view once computed is kept in closure_summaries. A request walks the closure once, the
// cost of listing it, to check the kept view is current (same nodes, same recorded sizes); only
// then are the shown nodes' names and cache-held sizes looked up. Otherwise one query returns
// the closure as arrays (by number, or by edges: closureReads.ts), closureRanking.ts picks the
// largest, and the view is kept for next time.
import type { Sql } from 'postgres';
import { largestClosures } from './closureRanking.js';
import { closureState, readByEdges, readNumbered, type ClosureRead } from './closureReads.js';
import { repairNumbers } from './derivationNumbers.js';
import { CLOSURE_NODE_LIMIT, type ClosureGraph, type ClosureNode } from './closureGraph.js';

/** Whose view: one root derivation (a build's) or an evaluation's entry points. */
export type SummaryKey = { derivation: string } | { evaluation: string };

/** A kept view: what it was computed from, and what it shows. */
interface Summary {
  root_count: number;
  node_count: number;
  edge_count: number;
  sized_count: number;
  total_size: string;
  node_ids: string[];
  closure_sizes: string[];
  edge_sources: number[];
  edge_targets: number[];
}

/** The hash part of a store path, in SQL (a path outside the store gives null). */
const HASH_PART_PATTERN = '/([0-9a-df-np-sv-z]{32})-[^/]*$';

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** The view of a closure read whole: the largest nodes, ranked; undefined when a shown node is gone meanwhile. */
async function rank(read: ClosureRead, rootCount: number): Promise<Summary | undefined> {
  const { sizes, offsets, deps } = read;
  const n = sizes.length;
  const ranked = largestClosures({ sizes, offsets, deps, roots: read.roots }, CLOSURE_NODE_LIMIT);
  const rankedIds = await read.ids(ranked.map((t) => t.index));
  if (!rankedIds) return undefined;
  const idOf = new Map(ranked.map((t, k) => [t.index, rankedIds[k]!]));
  const top = ranked.sort((a, b) => b.size - a.size || compare(idOf.get(a.index)!, idOf.get(b.index)!));
  const shownAt = new Int32Array(n).fill(-1);
  top.forEach((t, k) => (shownAt[t.index] = k));
  // the edges between shown nodes: each shown node's inputs that are shown (target depends on source)
  const edgeSources: number[] = [];
  const edgeTargets: number[] = [];
  for (const t of top) {
    for (let k = offsets[t.index]!; k < offsets[t.index + 1]!; k++) {
      const s = shownAt[deps[k]!]!;
      if (s >= 0) {
        edgeSources.push(s);
        edgeTargets.push(shownAt[t.index]!);
      }
    }
  }
  let total = 0;
  let sized = 0;
  for (let i = 0; i < n; i++) {
    total += sizes[i]!;
    if (sizes[i]! > 0) sized++;
  }
  return {
    root_count: rootCount, node_count: n, edge_count: deps.length, sized_count: sized, total_size: String(total),
    node_ids: top.map((t) => idOf.get(t.index)!), closure_sizes: top.map((t) => String(t.size)), edge_sources: edgeSources, edge_targets: edgeTargets,
  };
}

export function buildTimeClosures(sql: Sql) {
  /** repairs under way, by their roots */
  const repairing = new Map<string, Promise<void>>();
  async function kept(key: SummaryKey): Promise<Summary | undefined> {
    const [row] = await sql<Summary[]>`
      select root_count, node_count, edge_count, sized_count, total_size::text as total_size, node_ids::text[] as node_ids,
        closure_sizes::text[] as closure_sizes, edge_sources, edge_targets
      from closure_summaries where ${'derivation' in key ? sql`derivation_id = ${key.derivation}` : sql`evaluation_id = ${key.evaluation}`}`;
    return row;
  }

  /** The whole closure, by number when every node has a graph row, by edges otherwise (closureReads.ts), ranked. */
  async function compute(roots: string[]): Promise<Summary> {
    const numbered = await readNumbered(sql, roots);
    const summary = numbered && (await rank(numbered, roots.length));
    if (summary) return summary;
    const byEdges = (await rank(await readByEdges(sql, roots), roots.length))!;
    if (!numbered) await repair(roots);
    return byEdges;
  }

  /**
   * A node without a row, or a row naming a collected input: written again, so the next views go by
   * number. The view is already computed, so a repair that cannot run now (a deadlock, its lock
   * timeout, a failover) is left to the next view rather than failing this one; viewers of the same
   * closure at once share one repair in this process (review r7a part 1, item 1).
   */
  function repair(roots: string[]): Promise<void> {
    const key = roots.join();
    let running = repairing.get(key);
    if (running === undefined) {
      running = repairNumbers(sql, roots).then(() => undefined, () => undefined).finally(() => repairing.delete(key));
      repairing.set(key, running);
    }
    return running;
  }

  async function keep(key: SummaryKey, s: Summary): Promise<void> {
    const row = {
      derivation_id: 'derivation' in key ? key.derivation : null, evaluation_id: 'evaluation' in key ? key.evaluation : null,
      root_count: s.root_count, node_count: s.node_count, edge_count: s.edge_count, sized_count: s.sized_count, total_size: s.total_size,
    };
    const conflict = 'derivation' in key ? sql`(derivation_id) where derivation_id is not null` : sql`(evaluation_id) where evaluation_id is not null`;
    // The roots' rows may be gone meanwhile (collected): then there is nothing to keep.
    await sql`
      insert into closure_summaries (derivation_id, evaluation_id, root_count, node_count, edge_count, sized_count, total_size,
        node_ids, closure_sizes, edge_sources, edge_targets)
      select ${row.derivation_id}::uuid, ${row.evaluation_id}::uuid, ${row.root_count}, ${row.node_count}, ${row.edge_count}, ${row.sized_count},
        ${row.total_size}::bigint, ${s.node_ids}::uuid[], ${s.closure_sizes}::bigint[], ${s.edge_sources}::int[], ${s.edge_targets}::int[]
      where exists (select 1 from ${'derivation' in key ? sql`derivations where id = ${key.derivation}` : sql`evaluations where id = ${key.evaluation}`})
      on conflict ${conflict} do update set root_count = excluded.root_count, node_count = excluded.node_count, edge_count = excluded.edge_count,
        sized_count = excluded.sized_count, total_size = excluded.total_size, node_ids = excluded.node_ids, closure_sizes = excluded.closure_sizes,
        edge_sources = excluded.edge_sources, edge_targets = excluded.edge_targets, computed_at = now()`;
  }

  /** The shown nodes' names, paths and the sizes the project's caches hold now, missing rows are left out. */
  async function details(ids: string[], caches: string[]) {
    return sql<{ id: string; name: string; path: string; nar_size: string | null }[]>`
      select d.id::text as id, d.name, d.drv_path as path, held.nar_size::text as nar_size
      from unnest(${ids}::uuid[]) u(id) join derivations d on d.id = u.id
      left join lateral (
        select sum(s.nar_size) as nar_size from jsonb_each_text(d.outputs) o(name, path)
        cross join lateral (
          select max(cp.nar_size) as nar_size from path_signatures ps join cached_paths cp on cp.id = ps.cached_path_id
          where ps.cache_id = any(${caches}::uuid[]) and ps.hash_part = substring(o.path from ${HASH_PART_PATTERN})
        ) s
      ) held on true
      `;
  }

  return {
    /** The build-time ClosureGraph of `roots` (derivation ids), with nar_size from `caches`. */
    async graph(key: SummaryKey, roots: string[], caches: string[]): Promise<ClosureGraph> {
      let summary = await kept(key);
      if (summary) {
        const now = await closureState(sql, roots);
        const current = summary.root_count === roots.length && summary.node_count === now.node_count
          && summary.sized_count === now.sized_count && summary.total_size === now.total_size;
        if (!current) summary = undefined;
        else if (now.byEdges) await repair(roots);
      }
      let shown = summary && (await details(summary.node_ids, caches));
      // A shown derivation collected since: the kept view is stale too.
      if (!summary || !shown || shown.length !== summary.node_ids.length) {
        summary = await compute(roots);
        // Kept for next time while the shown nodes are looked up (two connections of the pool).
        [shown] = await Promise.all([details(summary.node_ids, caches), keep(key, summary)]);
      }
      const s = summary;
      const byId = new Map(shown.map((r) => [r.id, r]));
      const nodes: ClosureNode[] = [];
      s.node_ids.forEach((id, k) => {
        const r = byId.get(id);
        if (r) nodes.push({ id, name: r.name, path: r.path, nar_size: r.nar_size === null ? null : Number(r.nar_size), closure_size: Number(s.closure_sizes[k]) });
      });
      return {
        roots,
        total_size_bytes: Number(s.total_size),
        node_count: s.node_count,
        edge_count: s.edge_count,
        truncated: s.node_count > s.node_ids.length,
        nodes,
        edges: s.edge_sources.map((source, k) => ({ source: s.node_ids[source]!, target: s.node_ids[s.edge_targets[k]!]! }))
          .sort((a, b) => compare(a.target, b.target) || compare(a.source, b.source)),
      };
    },
  };
}
