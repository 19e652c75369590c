// The flake graph of an evaluation (worker.eval.metrics): the evaluated flake's flake.lock as nodes
// (each locked source) and edges (which input of which node is which node). Pure, bounded: a lock
// with more nodes or edges than the protocol carries is cut, and says so. The lock is the one the
// lock check read (flakeLock.ts), so this is no second parser of the tenant's file.
import { FLAKE_GRAPH_MAX_EDGES, FLAKE_GRAPH_MAX_NODES, type FlakeGraph } from '../protocol/index.js';
import type { FlakeLocks } from './flakeInputPolicy.js';

/** github/gitlab/sourcehut name a repository; the others a url or a path. */
const REPOSITORY_TYPES = new Set(['github', 'gitlab', 'sourcehut']);

const text = (value: unknown, max: number): string | null => (typeof value === 'string' ? value.slice(0, max) : null);

function sourceOf(locked: Record<string, unknown>): string | null {
  const type = locked['type'];
  if (typeof type === 'string' && REPOSITORY_TYPES.has(type)) {
    const owner = text(locked['owner'], 500);
    const repo = text(locked['repo'], 500);
    return owner !== null && repo !== null ? `${owner}/${repo}` : null;
  }
  return text(locked['url'], 1024) ?? text(locked['path'], 1024);
}

/** How many input steps resolving one `follows` may take: a hostile lock's cycle of follows ends there. */
const MAX_FOLLOW_STEPS = 256;

/** The node a `follows` path (input names from the root) ends at; null when it leads nowhere. */
function follow(lock: FlakeLocks, path: readonly string[], budget = { steps: MAX_FOLLOW_STEPS }): string | null {
  let key = lock.root;
  for (const name of path) {
    if (--budget.steps < 0) return null;
    const next = lock.nodes[key]?.inputs?.[name];
    if (next === undefined) return null;
    const resolved = typeof next === 'string' ? next : follow(lock, next, budget);
    if (resolved === null) return null;
    key = resolved;
  }
  return key;
}

/** The graph of a flake.lock (as `nix flake metadata --json` prints it under `locks`, checked by flakeLock.ts). */
export function flakeGraphOf(lock: FlakeLocks): FlakeGraph {
  const keys = Object.keys(lock.nodes).filter((key) => key.length <= 256);
  let truncated = keys.length < Object.keys(lock.nodes).length || keys.length > FLAKE_GRAPH_MAX_NODES;
  const kept = new Set(keys.slice(0, FLAKE_GRAPH_MAX_NODES));
  const nodes = [...kept].map((id) => {
    const locked = lock.nodes[id]?.locked ?? {};
    const lastModified = locked['lastModified'];
    return {
      id,
      type: text(locked['type'], 64),
      source: sourceOf(locked),
      rev: text(locked['rev'], 128),
      lastModified: typeof lastModified === 'number' && Number.isSafeInteger(lastModified) && lastModified >= 0 ? lastModified : null,
    };
  });
  const edges: FlakeGraph['edges'] = [];
  for (const from of kept) {
    for (const [input, target] of Object.entries(lock.nodes[from]?.inputs ?? {})) {
      // A list is a `follows`.
      const to = typeof target === 'string' ? target : follow(lock, target);
      if (to === null || !kept.has(to) || input.length > 256) continue;
      if (edges.length === FLAKE_GRAPH_MAX_EDGES) {
        truncated = true;
        break;
      }
      edges.push({ from, to, input });
    }
  }
  return { root: kept.has(lock.root) ? lock.root : lock.root.slice(0, 256), nodes, edges, truncated };
}
