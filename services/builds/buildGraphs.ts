// GET /builds/{id}/graph: the whole dependency graph of a build inside its evaluation, the build
// itself included, in one recursive query. Unlike the closure views it is not cut: every build
// the derivation needs, with its status, so a client can draw progress.
import type { Sql } from 'postgres';
import type { BuildViewsService } from './buildViews.js';
import type { Principal } from '../access/index.js';
import { organizationOfEvaluation, statusFor } from './organizationStatus.js';

export interface BuildGraphNode {
  build_id: string;
  derivation_build: string;
  drv_path: string;
  name: string;
  system: string;
  status: string;
}

export interface BuildGraph {
  root: string;
  nodes: BuildGraphNode[];
  /** build ids; target depends on source (as in ClosureGraph) */
  edges: { source: string; target: string }[];
}

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

export function buildGraphsService(sql: Sql, views: Pick<BuildViewsService, 'build'>) {
  return {
    async graph(who: Principal, buildId: string): Promise<BuildGraph> {
      const found = await views.build(who, buildId);
      // Derivations are keyed by id here; builds of the same evaluation name them.
      const nodes = await sql<(BuildGraphNode & { derivation_id: string })[]>`
        with recursive closure(id) as (
          select d.id from derivations d where d.drv_path = ${found.drv_path}
          union
          select e.depends_on from derivation_edges e join closure c on e.derivation_id = c.id
        )
        select b.id as build_id, db.id as derivation_build, d.drv_path, d.name, d.system,
          ${statusFor(sql, organizationOfEvaluation(sql, sql`${found.evaluation_id}::uuid`))} as status, d.id as derivation_id
        from closure c join derivations d on d.id = c.id join derivation_builds db on db.derivation_id = d.id
        join builds b on b.derivation_build_id = db.id and b.evaluation_id = ${found.evaluation_id}
        order by d.drv_path`;
      const buildOf = new Map(nodes.map((n) => [n.derivation_id, n.build_id]));
      const edges = await sql<{ derivation_id: string; depends_on: string }[]>`
        select derivation_id, depends_on from derivation_edges where derivation_id = any(${[...buildOf.keys()]}::uuid[])`;
      return {
        root: found.build_id,
        nodes: nodes.map(({ derivation_id: _, ...n }) => n),
        edges: edges
          .filter((e) => buildOf.has(e.depends_on))
          .map((e) => ({ source: buildOf.get(e.depends_on)!, target: buildOf.get(e.derivation_id)! }))
          .sort((a, b) => (a.target === b.target ? compare(a.source, b.source) : compare(a.target, b.target))),
      };
    },
  };
}
export type BuildGraphsService = ReturnType<typeof buildGraphsService>;
