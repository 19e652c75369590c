// Lays a ClosureGraph out with elkjs (layered, left to right: what a path depends on stands left of
// it). elkjs is ~1.6 MB and its start-up alone takes the main thread 150 ms, so it runs in a Web
// Worker of its own (a file of the build, allowed by the CSP's script-src 'self'), created for
// each layout and ended after it; its API half is imported on first use, outside the shell.
import type { ElkExtendedEdge, ElkNode } from 'elkjs/lib/elk-api';
import type { ClosureGraphView } from '$protocol/api/evaluations';

export interface PlacedNode {
  id: string;
  name: string;
  path: string;
  nar_size: number | null;
  closure_size: number;
  root: boolean;
  x: number;
  y: number;
  width: number;
  height: number;
}

export interface PlacedEdge {
  id: string;
  /** an SVG path through the edge's points */
  d: string;
}

export interface Layout {
  width: number;
  height: number;
  nodes: PlacedNode[];
  edges: PlacedEdge[];
}

export const NODE_HEIGHT = 38;
const CHAR_WIDTH = 7;

/** Wide enough for the name (cut at 40 characters) and its size line. */
const nodeWidth = (name: string): number => Math.min(40, Math.max(name.length, 12)) * CHAR_WIDTH + 20;

export async function layoutClosure(graph: ClosureGraphView): Promise<Layout> {
  const [{ default: ELK }, { default: ElkWorker }] = await Promise.all([
    import('elkjs/lib/elk-api.js'),
    import('elkjs/lib/elk-worker.min.js?worker'),
  ]);
  const elk = new ELK({ workerFactory: () => new ElkWorker() });
  const known = new Set(graph.nodes.map((n) => n.id));
  const edges: ElkExtendedEdge[] = graph.edges
    .filter((e) => known.has(e.source) && known.has(e.target) && e.source !== e.target)
    .map((e, i) => ({ id: `e${i}`, sources: [e.source], targets: [e.target] }));
  const root: ElkNode = {
    id: 'closure',
    layoutOptions: {
      'elk.algorithm': 'layered',
      'elk.direction': 'RIGHT',
      'elk.spacing.nodeNode': '12',
      'elk.layered.spacing.nodeNodeBetweenLayers': '40',
      'elk.edgeRouting': 'POLYLINE',
    },
    children: graph.nodes.map((n) => ({ id: n.id, width: nodeWidth(n.name), height: NODE_HEIGHT })),
    edges,
  };
  let placed: ElkNode;
  try {
    placed = await elk.layout(root);
  } finally {
    elk.terminateWorker();
  }
  const byId = new Map(graph.nodes.map((n) => [n.id, n]));
  const roots = new Set(graph.roots);
  return {
    width: placed.width ?? 0,
    height: placed.height ?? 0,
    nodes: (placed.children ?? []).map((c) => {
      const n = byId.get(c.id)!;
      return { ...n, root: roots.has(n.id), x: c.x ?? 0, y: c.y ?? 0, width: c.width ?? 0, height: c.height ?? NODE_HEIGHT };
    }),
    edges: (placed.edges ?? []).flatMap((e) =>
      (e.sections ?? []).map((s, i) => ({
        id: `${e.id}-${i}`,
        d: [s.startPoint, ...(s.bendPoints ?? []), s.endPoint].map((p, j) => `${j === 0 ? 'M' : 'L'}${p.x},${p.y}`).join(' '),
      })),
    ),
  };
}
