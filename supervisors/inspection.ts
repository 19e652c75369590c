// What operators see of the supervision tree: GET /api/v1/admin/actors returns root.inspect(), and
// the live WebSocket forwards onTransition records. Everything here is plain JSON.
import { isMachineSnapshot, type Snapshot } from 'xstate';
import { describeError } from './escalation.js';

export type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

/** running: live; restarting: crashed (or its supervisor gave up) and waiting to start again;
 *  done: reached a final state and left the tree; stopped: stopped for good. */
export type ActorLifecycle = 'running' | 'restarting' | 'done' | 'stopped';
/** halted: gave up (or its parent did) and waits for its parent to restart it. */
export type SupervisorStatus = 'running' | 'halted' | 'stopped';

export interface ActorNode {
  id: string;
  /** What the actor is: 'upload-budget', 'build', … */
  kind: string;
  /** The machine's state value; null for logic that has none. */
  state: Json;
  status: ActorLifecycle;
  /** Crashes recovered by a restart since the actor was spawned. */
  restarts: number;
  /** Events sent to the actor and not processed yet (see docs/supervision.md). */
  mailbox: number;
  /** The child spec's summarize(snapshot): a few counts or ids, never secrets or payloads. */
  summary?: Record<string, Json>;
  /** Message of the last crash. */
  error?: string;
}

export interface SupervisorNode {
  id: string;
  kind: 'supervisor';
  status: SupervisorStatus;
  restarts: number;
  /** Its restart budget (counted over all its children) and the restarts inside the window now. */
  restartBudget: { maxRestarts: number; withinMs: number; recent: number };
  children: InspectNode[];
  /** Message of the last escalation. */
  error?: string;
}

export type InspectNode = ActorNode | SupervisorNode;

/** One step of an actor or supervisor, as the live feed shows it. */
export interface ActorTransition {
  /** Path of the supervisor that owns the actor ("root/uploads"), or of the supervisor itself. */
  supervisor: string;
  id: string;
  kind: string;
  /** The event that caused the step: an actor event type, 'xstate.init', 'xstate.error', or
   *  'supervisor.escalated' / 'supervisor.restarted'. */
  event: string;
  state: Json;
  status: ActorLifecycle | SupervisorStatus;
  restarts: number;
  /** Milliseconds since the epoch, from the supervisor's clock. */
  at: number;
  error?: string;
}

export type TransitionListener = (transition: ActorTransition) => void;

// StateValue is a string or an object of StateValues, so it is JSON already; xstate's type is
// only wider because of `undefined` members, which JSON.stringify drops.
export const stateValueOf = (snapshot: Snapshot<unknown>): Json =>
  isMachineSnapshot(snapshot) ? (snapshot.value as Json) : null;

/**
 * Calls a listener that belongs to someone else (a live socket, a facade). A throw there must not
 * break the actor that triggered it, so it becomes a process warning, which the logger records.
 */
export function callListener<T>(listener: (value: T) => void, value: T): void {
  try {
    listener(value);
  } catch (error) {
    process.emitWarning(`a supervision listener threw: ${describeError(error)}`, {
      type: 'SupervisionListenerWarning',
      ...(error instanceof Error && error.stack ? { detail: error.stack } : {}),
    });
  }
}

export class TransitionFeed {
  private readonly listeners = new Set<TransitionListener>();

  /** Returns the function that unsubscribes. */
  add(listener: TransitionListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  emit(transition: ActorTransition): void {
    for (const listener of this.listeners) callListener(listener, transition);
  }
}
