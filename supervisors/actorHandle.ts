// One supervised actor across its incarnations: the xstate actor of the moment, the events that
// wait while it restarts, its counters and its observers. Its supervisor decides whether it may
// restart; this file only carries the decision out.
import {
  createActor,
  type Actor,
  type AnyActorLogic,
  type EventFromLogic,
  type InspectionEvent,
  type Observer,
  type Snapshot,
  type SnapshotFrom,
  type Subscription,
} from 'xstate';
import type { ActorSpec, ActorStart, ChildOwner, RestartReason, SupervisedActor, SupervisedChild } from './child.js';
import { describeError } from './escalation.js';
import { callListener, stateValueOf, type ActorLifecycle, type ActorNode, type Json } from './inspection.js';

// SnapshotFrom<TLogic> stays unresolved for a generic TLogic, though every snapshot has a status.
const snapshotOf = (actor: Actor<AnyActorLogic>): Snapshot<unknown> => actor.getSnapshot() as Snapshot<unknown>;

export class ActorHandle<TLogic extends AnyActorLogic> implements SupervisedActor<TLogic>, SupervisedChild {
  readonly id: string;
  readonly kind: string;
  readonly logic: TLogic;
  private restartCount = 0;
  private incarnationCount = 0;
  private lifecycle: ActorLifecycle = 'restarting';
  private actor: Actor<TLogic> | undefined;
  // Events sent while no incarnation runs, delivered in order to the next one.
  private readonly waiting: EventFromLogic<TLogic>[] = [];
  // xstate keeps its mailbox private and drains it inside send(); the inspection feed tells what
  // arrived and what was processed, and the difference is what is still queued. A crashed
  // incarnation's queue is gone with it (xstate clears it), so only a running one counts.
  private received = 0;
  private processed = 0;
  private lastError: string | undefined;
  private readonly observers = new Set<Observer<SnapshotFrom<TLogic>>>();

  constructor(
    private readonly spec: ActorSpec<TLogic>,
    private readonly owner: ChildOwner,
  ) {
    this.id = spec.id;
    this.kind = spec.kind;
    this.logic = spec.logic;
  }

  get restarts(): number {
    return this.restartCount;
  }

  get incarnation(): number {
    return this.incarnationCount;
  }

  send(event: EventFromLogic<TLogic>): void {
    if (this.lifecycle === 'running' && this.actor) this.actor.send(event);
    else if (this.lifecycle === 'restarting') this.waiting.push(event);
    // done or stopped: dropped, like a message to a process that has exited.
  }

  getSnapshot(): SnapshotFrom<TLogic> {
    if (!this.actor) throw new Error(`actor ${this.id} has not started yet`);
    return this.actor.getSnapshot();
  }

  subscribe(observer: Observer<SnapshotFrom<TLogic>> | ((snapshot: SnapshotFrom<TLogic>) => void)): Subscription {
    const entry = typeof observer === 'function' ? { next: observer } : { ...observer };
    if (this.lifecycle === 'done' || this.lifecycle === 'stopped') {
      if (entry.complete) callListener(entry.complete, undefined);
      return { unsubscribe: () => {} };
    }
    this.observers.add(entry);
    return { unsubscribe: () => this.observers.delete(entry) };
  }

  /** Starts a fresh incarnation; the supervisor calls it once at spawn, restart() after that. */
  start(from: ActorStart<TLogic>): void {
    this.incarnationCount += 1;
    this.received = 0;
    this.processed = 0;
    let actor: Actor<TLogic> | undefined = undefined;
    const options = {
      id: this.id,
      input: from.input,
      snapshot: from.snapshot,
      // The system's feed also carries actors this one spawns; only its own steps count here.
      inspect: (event: InspectionEvent) => {
        if (actor !== undefined && event.actorRef === actor) this.inspected(actor, event);
      },
    };
    // createActor's options type depends on whether the logic needs input, which a generic TLogic
    // cannot tell; the spec's `input` is typed as InputFrom<TLogic> already.
    actor = createActor(this.logic as AnyActorLogic, options) as Actor<TLogic>;
    const started = actor;
    this.actor = started;
    this.lifecycle = 'running';
    started.subscribe({
      next: (snapshot) => {
        for (const observer of this.observers) if (observer.next) callListener(observer.next, snapshot);
      },
      error: (error) => this.crashed(started, error),
      complete: () => this.completed(started),
    });
    started.start();
    // start() may have crashed it already; the event that crashes it is consumed, the rest wait.
    while (this.waiting.length > 0 && this.lifecycle === 'running' && this.actor === started) {
      started.send(this.waiting.shift()!);
    }
  }

  halt(): void {
    if (this.lifecycle !== 'running') return;
    this.lifecycle = 'restarting';
    this.actor?.stop();
  }

  async restart(reason: RestartReason): Promise<void> {
    if (reason === 'crash') this.restartCount += 1;
    let from: ActorStart<TLogic> | null;
    try {
      // Awaiting even a plain value defers the restart out of the crashing actor's call stack.
      from = await (this.spec.rehydrate ? this.spec.rehydrate() : { input: this.spec.input });
    } catch (error) {
      if (this.lifecycle === 'restarting' && this.owner.isRunning()) {
        this.lastError = `rehydrate: ${describeError(error)}`;
        this.owner.childFailed(this, error);
      }
      return;
    }
    // Another restart got here first, or the supervisor stopped or gave up meanwhile.
    if (this.lifecycle !== 'restarting' || !this.owner.isRunning()) return;
    if (from === null) this.leave('done');
    else this.start(from);
  }

  stop(): void {
    if (this.lifecycle === 'stopped' || this.lifecycle === 'done') return;
    this.leave('stopped');
  }

  inspect(): ActorNode {
    const snapshot = this.actor ? snapshotOf(this.actor) : undefined;
    const node: ActorNode = {
      id: this.id,
      kind: this.kind,
      state: snapshot ? stateValueOf(snapshot) : null,
      status: this.lifecycle,
      restarts: this.restartCount,
      mailbox: this.waiting.length + (this.lifecycle === 'running' ? Math.max(0, this.received - this.processed) : 0),
    };
    if (this.actor && this.spec.summarize && snapshot?.status === 'active') node.summary = this.summary(this.actor.getSnapshot());
    if (this.lastError !== undefined) node.error = this.lastError;
    return node;
  }

  private summary(snapshot: SnapshotFrom<TLogic>): Record<string, Json> {
    try {
      return this.spec.summarize!(snapshot);
    } catch (error) {
      return { unavailable: `summarize failed: ${describeError(error)}` };
    }
  }

  private inspected(actor: Actor<TLogic>, event: InspectionEvent): void {
    if (event.type === '@xstate.event') this.received += 1;
    if (event.type !== '@xstate.snapshot') return;
    this.processed += 1;
    this.emit(event.event.type, actor);
  }

  private crashed(actor: Actor<TLogic>, error: unknown): void {
    if (actor !== this.actor || this.lifecycle !== 'running') return;
    this.lifecycle = 'restarting';
    this.lastError = describeError(error);
    this.emit('xstate.error', actor);
    this.owner.childFailed(this, error);
  }

  // xstate completes observers both when the actor reaches a final state and when it is stopped;
  // only the first means the actor is finished.
  private completed(actor: Actor<TLogic>): void {
    if (actor !== this.actor || this.lifecycle !== 'running') return;
    if (snapshotOf(actor).status === 'done') this.leave('done');
  }

  private leave(lifecycle: 'done' | 'stopped'): void {
    const wasRunning = this.lifecycle === 'running';
    this.lifecycle = lifecycle;
    this.waiting.length = 0;
    if (wasRunning) this.actor?.stop();
    for (const observer of this.observers) if (observer.complete) callListener(observer.complete, undefined);
    this.observers.clear();
    if (lifecycle === 'done') this.owner.childLeft(this);
  }

  private emit(event: string, actor: Actor<TLogic>): void {
    const snapshot = snapshotOf(actor);
    this.owner.emitTransition({
      supervisor: this.owner.path,
      id: this.id,
      kind: this.kind,
      event,
      state: stateValueOf(snapshot),
      status: this.lifecycle,
      restarts: this.restartCount,
      at: this.owner.now(),
      ...(this.lastError !== undefined && snapshot.status === 'error' ? { error: this.lastError } : {}),
    });
  }
}
