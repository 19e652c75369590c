// The supervision tree on the page: finding a node, and applying an actor.transition frame to the
// tree fetched from GET /admin/actors so the page moves at once, before the next fetch makes it exact.
import type { ActorNodeView, ActorTransitionView, InspectNodeView, SupervisorNodeView } from '$protocol/api/admin';

export const isSupervisor = (node: InspectNodeView): node is SupervisorNodeView => node.kind === 'supervisor';

export function findNode(node: InspectNodeView, id: string): InspectNodeView | undefined {
  if (node.id === id) return node;
  if (!isSupervisor(node)) return undefined;
  for (const child of node.children) {
    const found = findNode(child, id);
    if (found) return found;
  }
  return undefined;
}

/** Counts actors and supervisors below `node`, for the page's summary line. */
export function countNodes(node: InspectNodeView): { actors: number; supervisors: number } {
  if (!isSupervisor(node)) return { actors: 1, supervisors: 0 };
  return node.children.reduce(
    (sum, child) => {
      const c = countNodes(child);
      return { actors: sum.actors + c.actors, supervisors: sum.supervisors + c.supervisors };
    },
    { actors: 0, supervisors: 1 },
  );
}

/**
 * Updates the node the transition names, in place (the tree is Svelte state). Returns false when
 * the tree does not have it yet (a new actor): then only a fetch shows where it sits.
 */
export function applyTransition(root: SupervisorNodeView, t: ActorTransitionView): boolean {
  const node = findNode(root, t.id);
  if (!node) return false;
  node.restarts = t.restarts;
  if (t.error !== undefined) node.error = t.error;
  if (isSupervisor(node)) {
    if (t.status === 'running' || t.status === 'halted' || t.status === 'stopped') node.status = t.status;
  } else {
    const actor: ActorNodeView = node;
    actor.state = t.state;
    if (t.status !== 'halted') actor.status = t.status;
  }
  return true;
}

/** A state value as one line: `idle`, or `{"running":"fetching"}` for nested states. */
export const stateText = (state: unknown): string => (typeof state === 'string' ? state : state === null ? '—' : JSON.stringify(state));
