// Something a supervisor lists among its children without running it (a loop, a pool): operators
// see it in GET /api/v1/admin/actors like an actor, but it is never restarted or stopped from here.
import type { SupervisedChild } from './child.js';
import type { ActorNode } from './inspection.js';

/** The parts of an actor's node the watched thing reports itself. */
export type WatchedState = Pick<ActorNode, 'state' | 'status' | 'mailbox' | 'summary' | 'error'>;

export interface Watched {
  /** Like an actor id: non-empty, no '/'. */
  id: string;
  kind: string;
  inspect(): WatchedState;
}

/** The child a supervisor keeps for it: halts and restarts do nothing, stop only unlists it. */
export function watchedChild(watched: Watched, unlist: (child: SupervisedChild) => void): SupervisedChild {
  const child: SupervisedChild = {
    id: watched.id,
    halt: () => undefined,
    restart: () => Promise.resolve(),
    stop: () => unlist(child),
    inspect: () => ({ id: watched.id, kind: watched.kind, restarts: 0, ...watched.inspect() }),
  };
  return child;
}
