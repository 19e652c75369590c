// A supervised actor without xstate, for machines spawned by the thousand a second (one per
// dispatched job): a plain transition function over a state name and a context. It sits in the
// tree like any actor (unique id, GET /admin/actors node, a transition on the live feed per step,
// leaves the tree on a final state) and keeps the supervision rules of docs/supervision.md: a step
// that throws is a crash, counted against its supervisor's restart budget, and the actor restarts
// from `rehydrate()` (null: it leaves the tree) or from its initial state. An xstate actor costs
// tens of microseconds to create and to step (its system, mailbox and inspection); this costs an
// object and a function call, which the dispatch bench measures (bench/README.md).
import type { ChildOwner, SupervisedChild } from './child.js';
import { describeError } from './escalation.js';
import type { ActorLifecycle, ActorNode, Json } from './inspection.js';

/** What a step leads to; null: the state does not take the event (dropped, as xstate drops it). */
export type LightStep<S extends string, C> = { state: S; context: C } | null;

export interface LightMachine<S extends string, E extends { type: string }, C, I> {
  initial: S;
  /** reaching one of these ends the actor: it leaves the tree */
  final: ReadonlySet<S>;
  context(input: I): C;
  /** must not change `context` in place: a step that throws leaves the actor as it was */
  step(state: S, context: C, event: E): LightStep<S, C>;
}

export interface LightActorSpec<S extends string, E extends { type: string }, C, I> {
  /** unique in the whole tree, like an actor id */
  id: string;
  kind: string;
  machine: LightMachine<S, E, C, I>;
  input: I;
  /** where a crashed actor starts again; null: it leaves the tree. Default: the initial state with `input`. */
  rehydrate?: () => { state: S; context: C } | null;
  summarize?: (state: S, context: C) => Record<string, Json>;
}

export class LightActor<S extends string, E extends { type: string }, C, I> implements SupervisedChild {
  readonly id: string;
  readonly kind: string;
  private lifecycle: ActorLifecycle = 'running';
  private restartCount = 0;
  private lastError: string | undefined;
  private current: S;
  private data: C;
  /** events sent while it restarts, delivered in order to the next incarnation (docs/supervision.md, rule 4) */
  private readonly waiting: E[] = [];

  constructor(private readonly spec: LightActorSpec<S, E, C, I>, private readonly owner: ChildOwner) {
    this.id = spec.id;
    this.kind = spec.kind;
    this.current = spec.machine.initial;
    this.data = spec.machine.context(spec.input);
  }

  get state(): S {
    return this.current;
  }

  get context(): C {
    return this.data;
  }

  get status(): ActorLifecycle {
    return this.lifecycle;
  }

  /**
   * Whether its state takes the event, as xstate's snapshot.can answers: by the state alone, also
   * after a subtree restart dropped the actor (rehydrate null), so that the owner's records (the
   * scheduler's job table) still end the job once and free its worker's slot.
   */
  can(event: E): boolean {
    return this.spec.machine.step(this.current, this.data, event) !== null;
  }

  /** Steps the actor; events to an actor that ended are dropped, like messages to an exited process. */
  send(event: E): void {
    if (this.lifecycle === 'restarting') this.waiting.push(event);
    if (this.lifecycle !== 'running') return;
    let next: LightStep<S, C>;
    try {
      next = this.spec.machine.step(this.current, this.data, event);
    } catch (error) {
      this.crashed(error);
      return;
    }
    if (next === null) return;
    this.current = next.state;
    this.data = next.context;
    const done = this.spec.machine.final.has(next.state);
    if (done) this.lifecycle = 'done';
    this.emit(event.type);
    if (done) this.owner.childLeft(this);
  }

  /** Called once by the supervisor that spawned it: the first transition of the feed. */
  started(): void {
    this.emit('xstate.init');
  }

  halt(): void {
    if (this.lifecycle === 'running') this.lifecycle = 'restarting';
  }

  async restart(reason: 'crash' | 'subtree'): Promise<void> {
    if (reason === 'crash') this.restartCount += 1;
    // out of the crashing call stack, as xstate actors restart
    await Promise.resolve();
    if (this.lifecycle !== 'restarting' || !this.owner.isRunning()) return;
    const from = this.spec.rehydrate ? this.spec.rehydrate() : { state: this.spec.machine.initial, context: this.spec.machine.context(this.spec.input) };
    if (from === null) {
      this.lifecycle = 'done';
      this.waiting.length = 0;
      this.owner.childLeft(this);
      return;
    }
    this.current = from.state;
    this.data = from.context;
    this.lifecycle = 'running';
    this.emit('xstate.init');
    while (this.waiting.length > 0 && this.lifecycle === 'running') this.send(this.waiting.shift()!);
  }

  stop(): void {
    if (this.lifecycle === 'stopped' || this.lifecycle === 'done') return;
    this.lifecycle = 'stopped';
    this.waiting.length = 0;
    this.emit('xstate.stop');
  }

  inspect(): ActorNode {
    const node: ActorNode = { id: this.id, kind: this.kind, state: this.current, status: this.lifecycle, restarts: this.restartCount, mailbox: this.waiting.length };
    if (this.spec.summarize && this.lifecycle !== 'done') {
      try {
        node.summary = this.spec.summarize(this.current, this.data);
      } catch (error) {
        node.summary = { unavailable: `summarize failed: ${describeError(error)}` };
      }
    }
    if (this.lastError !== undefined) node.error = this.lastError;
    return node;
  }

  private crashed(error: unknown): void {
    this.lifecycle = 'restarting';
    this.lastError = describeError(error);
    this.emit('xstate.error');
    this.owner.childFailed(this, error);
  }

  private emit(event: string): void {
    this.owner.emitTransition({
      supervisor: this.owner.path,
      id: this.id,
      kind: this.kind,
      event,
      state: this.current,
      status: this.lifecycle,
      restarts: this.restartCount,
      at: this.owner.now(),
      ...(this.lastError !== undefined && this.lifecycle === 'restarting' ? { error: this.lastError } : {}),
    });
  }
}
