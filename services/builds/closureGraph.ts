// The ClosureGraph answer (spec: Resources; docs/builds.md "Graph, closures and products") and how
// many of its nodes are shown (spec: Limits, "Closure nodes").

export const CLOSURE_NODE_LIMIT = 500;

export interface ClosureNode {
  id: string;
  name: string;
  path: string;
  /** bytes of the NAR(s) a cache of the project holds now; for a derivation the sum of its cached outputs; null when nothing is cached */
  nar_size: number | null;
  /** accumulated closure size: the node's size and that of everything it depends on, each once (build-time: recorded output sizes) */
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

