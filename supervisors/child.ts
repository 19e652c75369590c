// The contracts between a supervisor and what it supervises: the spec a caller hands in, the
// handle a caller gets back, and the small interface both kinds of child (actors and supervisors)
// present to their parent.
import type { AnyActorLogic, EventFromLogic, InputFrom, Observer, Snapshot, SnapshotFrom, Subscription } from 'xstate';
import type { ActorTransition, InspectNode, Json } from './inspection.js';

/** Where an actor (re)starts: its input, and optionally a persisted snapshot to resume from. */
export interface ActorStart<TLogic extends AnyActorLogic> {
  input: InputFrom<TLogic>;
  /** From `machine.resolveState({ value: row.status, context })`; entry actions are not replayed. */
  snapshot?: Snapshot<unknown>;
}

export interface ActorSpec<TLogic extends AnyActorLogic> {
  /** Unique in the whole tree; services find the actor by it ('upload-budget', 'build:<uuid>'). */
  id: string;
  /** What the actor is, for operators ('upload-budget', 'build'). */
  kind: string;
  logic: TLogic;
  input: InputFrom<TLogic>;
  /**
   * How to start again after a crash; by default from the initial state with `input`. Actors whose
   * database row is the source of truth read the row here. Returning null means there is nothing
   * left to run (the row is terminal): the actor leaves the tree instead of restarting. A throw or
   * rejection counts as another failure against the restart budget.
   */
  rehydrate?: () => ActorStart<TLogic> | null | Promise<ActorStart<TLogic> | null>;
  /** A small JSON summary for GET /api/v1/admin/actors: counts and ids, never secrets or payloads. */
  summarize?: (snapshot: SnapshotFrom<TLogic>) => Record<string, Json>;
}

/**
 * What a caller holds: a stable address for the actor across restarts, like a registered name in
 * Erlang. Events sent while the actor is restarting wait and go to the new incarnation.
 */
export interface SupervisedActor<TLogic extends AnyActorLogic> {
  readonly id: string;
  readonly kind: string;
  /** Crashes recovered by a restart. */
  readonly restarts: number;
  /** Counts fresh starts (first start included); a change tells clients the actor forgot them. */
  readonly incarnation: number;
  send(event: EventFromLogic<TLogic>): void;
  getSnapshot(): SnapshotFrom<TLogic>;
  /**
   * Snapshots of every incarnation, the initial one of each restart included. `complete` is called
   * when the actor leaves the tree (done or stopped); crashes are the supervisor's business and
   * never reach `error`.
   */
  subscribe(observer: Observer<SnapshotFrom<TLogic>> | ((snapshot: SnapshotFrom<TLogic>) => void)): Subscription;
}

export type RestartReason = 'crash' | 'subtree';

/** What a parent asks of a child, actor or supervisor alike. */
export interface SupervisedChild {
  readonly id: string;
  /** Stops the child but keeps it, ready to restart (its supervisor gave up). */
  halt(): void;
  /** Starts the child again: after its own crash, or because its whole subtree restarts. */
  restart(reason: RestartReason): Promise<void>;
  /** Stops the child for good. */
  stop(): void;
  inspect(): InspectNode;
}

/** What a child asks of its parent. */
export interface ChildOwner {
  readonly path: string;
  isRunning(): boolean;
  now(): number;
  childFailed(child: SupervisedChild, error: unknown): void;
  /** The child finished (final state, or nothing to rehydrate) and leaves the tree. */
  childLeft(child: SupervisedChild): void;
  emitTransition(transition: ActorTransition): void;
}
