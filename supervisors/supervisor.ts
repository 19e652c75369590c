// A supervisor owns actors and child supervisors (a tree) with one-for-one restarts: a crashed
// child is restarted alone; when the restart budget is spent the supervisor stops its children and
// escalates to its parent, which counts it as one failed child. The root escalates to the server.
// The rules are written out in docs/supervision.md.
import type { AnyActorLogic } from 'xstate';
import { ActorHandle } from './actorHandle.js';
import type { ActorSpec, ChildOwner, RestartReason, SupervisedActor, SupervisedChild } from './child.js';
import { EscalationError } from './escalation.js';
import { TransitionFeed, type ActorTransition, type SupervisorNode, type SupervisorStatus, type TransitionListener } from './inspection.js';
import { LightActor, type LightActorSpec } from './lightActor.js';
import { ActorRegistry, checkActorId } from './registry.js';
import { RestartBudget, checkRestartBudget, defaultRestartBudget, type RestartBudgetLimits } from './restartBudget.js';
import { watchedChild, type Watched } from './watched.js';

export interface SupervisorOptions {
  /** Unique in the tree, like actor ids; becomes a segment of the path ("root/uploads"). */
  id: string;
  /** Default: 5 restarts within 10 s, counted over all children of this supervisor. */
  restartBudget?: RestartBudgetLimits;
}

export interface RootSupervisorOptions extends Partial<SupervisorOptions> {
  /** The root gave up. The server logs the error and exits non-zero. */
  onEscalate(error: EscalationError): void;
  /** The clock of the restart budgets (tests pass their own); default Date.now. */
  now?: () => number;
}

/** Actors (xstate or light) and supervisors: the registry only compares ids and identities. */
type RegistryEntry = { readonly id: string };

/** Creates the root of a supervision tree. */
export function createRootSupervisor(options: RootSupervisorOptions): Supervisor {
  const tree = { registry: new ActorRegistry<RegistryEntry>(), now: options.now ?? Date.now };
  const { onEscalate, id = 'root', restartBudget } = options;
  return new Supervisor({ id, restartBudget }, tree, { onEscalate });
}

interface Tree {
  registry: ActorRegistry<RegistryEntry>;
  now: () => number;
}

type Parent = { supervisor: Supervisor } | { onEscalate: (error: EscalationError) => void };

export class Supervisor {
  readonly id: string;
  /** "root/uploads": where this supervisor sits in the tree. */
  readonly path: string;
  private status: SupervisorStatus = 'running';
  private restartCount = 0;
  private lastError: string | undefined;
  /** in start order (a Set keeps it): removing one of thousands of job actors is not a scan */
  private readonly children = new Set<SupervisedChild>();
  private readonly budget: RestartBudget;
  private readonly feed = new TransitionFeed();
  // What this supervisor shows its children and its parent; kept off the public surface.
  private readonly asOwner: ChildOwner;
  private readonly asChild: SupervisedChild;

  /** Use createRootSupervisor() or supervise(). */
  constructor(
    options: SupervisorOptions,
    private readonly tree: Tree,
    private readonly parent: Parent,
  ) {
    this.id = checkActorId(options.id, 'supervisor');
    this.path = 'supervisor' in parent ? `${parent.supervisor.path}/${this.id}` : this.id;
    this.budget = new RestartBudget(checkRestartBudget(options.restartBudget ?? defaultRestartBudget, this.path), tree.now);
    tree.registry.add(this, this.path);
    this.asOwner = {
      path: this.path,
      isRunning: () => this.status === 'running',
      now: () => this.tree.now(),
      childFailed: (child, error) => this.childFailed(child, error),
      childLeft: (child) => this.removeChild(child),
      emitTransition: (transition) => this.emitTransition(transition),
    };
    this.asChild = {
      id: this.id,
      halt: () => this.halt(),
      restart: (reason) => this.restart(reason),
      stop: () => this.stop(),
      inspect: () => this.inspect(),
    };
  }

  /** Starts an actor under this supervisor; the handle stays valid across restarts. */
  spawn<TLogic extends AnyActorLogic>(spec: ActorSpec<TLogic>): SupervisedActor<TLogic> {
    checkActorId(spec.id, `actor (kind ${JSON.stringify(spec.kind)})`);
    this.mustBeRunning(`spawn ${spec.id}`);
    const handle = new ActorHandle(spec, this.asOwner);
    this.tree.registry.add(handle, this.path);
    this.children.add(handle);
    handle.start({ input: spec.input });
    return handle;
  }

  /** Starts a light actor (supervisors/lightActor.ts) under this supervisor: a plain transition function, same rules. */
  spawnLight<S extends string, E extends { type: string }, C, I>(spec: LightActorSpec<S, E, C, I>): LightActor<S, E, C, I> {
    checkActorId(spec.id, `actor (kind ${JSON.stringify(spec.kind)})`);
    this.mustBeRunning(`spawn ${spec.id}`);
    const actor = new LightActor(spec, this.asOwner);
    this.tree.registry.add(actor, this.path);
    this.children.add(actor);
    actor.started();
    return actor;
  }

  /** Creates a child supervisor, for a group of actors that fail and restart together. */
  supervise(options: SupervisorOptions): Supervisor {
    this.mustBeRunning(`supervise ${options.id}`);
    const child = new Supervisor(options, this.tree, { supervisor: this });
    this.children.add(child.asChild);
    return child;
  }

  /** Lists something this supervisor does not run (a loop) among its children; returns the unlisting. */
  watch(watched: Watched): () => void {
    checkActorId(watched.id, `watched (kind ${JSON.stringify(watched.kind)})`);
    this.mustBeRunning(`watch ${watched.id}`);
    const child = watchedChild(watched, (c) => this.removeChild(c));
    this.children.add(child);
    return () => this.removeChild(child);
  }

  /** The live actor with this id anywhere in the tree, if it runs `logic` (which types the handle). */
  lookup<TLogic extends AnyActorLogic>(id: string, logic: TLogic): SupervisedActor<TLogic> | undefined {
    const entry = this.tree.registry.get(id);
    if (entry instanceof ActorHandle && entry.logic === logic) return entry as ActorHandle<TLogic>;
    return undefined;
  }

  /** Stops one direct child (actor or supervisor) for good; false when there is no such child. */
  stopChild(id: string): boolean {
    const child = [...this.children].find((c) => c.id === id);
    if (!child) return false;
    child.stop();
    this.removeChild(child);
    return true;
  }

  /** The subtree for GET /api/v1/admin/actors. */
  inspect(): SupervisorNode {
    const node: SupervisorNode = {
      id: this.id,
      kind: 'supervisor',
      status: this.status,
      restarts: this.restartCount,
      restartBudget: { ...this.budget.limits, recent: this.budget.recent() },
      children: [...this.children].map((child) => child.inspect()),
    };
    if (this.lastError !== undefined) node.error = this.lastError;
    return node;
  }

  /** Every step of every actor in this subtree, and its supervisors' restarts and escalations. */
  onTransition(listener: TransitionListener): () => void {
    return this.feed.add(listener);
  }

  /** Stops the subtree for good, children in reverse start order, so the deepest stop first. */
  stop(): void {
    if (this.status === 'stopped') return;
    this.status = 'stopped';
    for (const child of [...this.children].reverse()) {
      child.stop();
      this.removeChild(child);
    }
    this.tree.registry.remove(this);
    if ('supervisor' in this.parent) this.parent.supervisor.removeChild(this.asChild);
  }

  private childFailed(child: SupervisedChild, error: unknown): void {
    if (this.status !== 'running') return;
    if (this.budget.tryRestart()) {
      void child.restart('crash');
      return;
    }
    const escalation = new EscalationError(this.path, child.id, this.budget.limits, error);
    this.lastError = escalation.message;
    this.halt();
    this.emitSelf('supervisor.escalated');
    if ('supervisor' in this.parent) this.parent.supervisor.childFailed(this.asChild, escalation);
    else this.parent.onEscalate(escalation);
  }

  private halt(): void {
    if (this.status !== 'running') return;
    this.status = 'halted';
    for (const child of [...this.children].reverse()) child.halt();
  }

  private async restart(reason: RestartReason): Promise<void> {
    if (reason === 'crash') this.restartCount += 1;
    await Promise.resolve(); // out of the failing child's call stack, as actors restart
    const parentRunning = 'supervisor' in this.parent ? this.parent.supervisor.status === 'running' : true;
    if (this.status !== 'halted' || !parentRunning) return;
    this.status = 'running';
    this.budget.reset();
    this.emitSelf('supervisor.restarted');
    await Promise.all([...this.children].map((child) => child.restart('subtree')));
  }

  private removeChild(child: SupervisedChild): void {
    this.children.delete(child);
    if (child instanceof ActorHandle || child instanceof LightActor) this.tree.registry.remove(child);
  }

  private mustBeRunning(what: string): void {
    if (this.status !== 'running') {
      throw new Error(`supervisor ${this.path} is ${this.status}: cannot ${what}`);
    }
  }

  private emitTransition(transition: ActorTransition): void {
    this.feed.emit(transition);
    if ('supervisor' in this.parent) this.parent.supervisor.emitTransition(transition);
  }

  private emitSelf(event: string): void {
    this.emitTransition({
      supervisor: this.path,
      id: this.id,
      kind: 'supervisor',
      event,
      state: null,
      status: this.status,
      restarts: this.restartCount,
      at: this.tree.now(),
      ...(event === 'supervisor.escalated' && this.lastError !== undefined ? { error: this.lastError } : {}),
    });
  }
}
