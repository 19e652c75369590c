// What the superuser pages read: the supervision tree (GET /admin/actors), its transitions
// (/admin/actors/live), and the connected workers (GET /workers). Views only: these take no body.
import { z } from 'zod';
import { LoadMetrics, WorkerCapabilities } from '../proto/handshakeMessages.js';

/** A state value: a string, or an object of state values for parallel and nested states; null without a machine. */
const StateValue = z.json();

/** An actor in the tree (supervisors/inspection.ts ActorNode). */
export const ActorNodeView = z.strictObject({
  id: z.string(),
  kind: z.string(),
  state: StateValue,
  status: z.enum(['running', 'restarting', 'done', 'stopped']),
  restarts: z.int().min(0),
  mailbox: z.int().min(0),
  summary: z.record(z.string(), z.json()).optional(),
  error: z.string().optional(),
});
export type ActorNodeView = z.infer<typeof ActorNodeView>;

/** Spent and allowed restarts of a supervisor, over all its children. */
export const RestartBudgetView = z.strictObject({
  maxRestarts: z.int().min(0),
  withinMs: z.int().min(1),
  /** restarts inside the window now */
  recent: z.int().min(0),
});

export interface SupervisorNodeView {
  id: string;
  kind: 'supervisor';
  status: 'running' | 'halted' | 'stopped';
  restarts: number;
  restartBudget: z.infer<typeof RestartBudgetView>;
  children: (ActorNodeView | SupervisorNodeView)[];
  error?: string | undefined;
}

/** A supervisor and its subtree; GET /admin/actors answers the root. */
export const SupervisorNodeView: z.ZodType<SupervisorNodeView> = z.strictObject({
  id: z.string(),
  kind: z.literal('supervisor'),
  status: z.enum(['running', 'halted', 'stopped']),
  restarts: z.int().min(0),
  restartBudget: RestartBudgetView,
  get children() {
    return z.array(z.union([SupervisorNodeView, ActorNodeView]));
  },
  error: z.string().optional(),
});
/** @public the web UI's actor tree (frontend/src/lib/admin) reads nodes of either kind. */
export type InspectNodeView = ActorNodeView | SupervisorNodeView;

/** The content of an actor.transition frame on /admin/actors/live: one step of an actor or supervisor. */
export const ActorTransitionView = z.strictObject({
  /** path of the owning supervisor ("root/scheduler"), or of the supervisor itself */
  supervisor: z.string(),
  id: z.string(),
  kind: z.string(),
  /** xstate.init (a start or restart), xstate.error (a crash), xstate.stop, supervisor.escalated, supervisor.restarted, or the actor's event */
  event: z.string(),
  state: StateValue,
  status: z.enum(['running', 'restarting', 'done', 'stopped', 'halted']),
  restarts: z.int().min(0),
  /** milliseconds since the epoch */
  at: z.number(),
  error: z.string().optional(),
});
export type ActorTransitionView = z.infer<typeof ActorTransitionView>;

/** A worker connected to this server process (GET /workers). */
export const ConnectedWorkerView = z.strictObject({
  id: z.uuid(),
  connection_id: z.string(),
  software: z.string(),
  capabilities: WorkerCapabilities,
  architectures: z.array(z.string()),
  system_features: z.array(z.string()),
  max_concurrent_builds: z.int(),
  max_concurrent_evals: z.int(),
  zone: z.string().nullable(),
  /** ids of the projects its tokens admit it to */
  projects: z.array(z.string()),
  /** admitted without a token (open mode) */
  open: z.boolean(),
  connected_at: z.iso.datetime({ offset: true }),
  last_seen_at: z.iso.datetime({ offset: true }),
  /** the last heartbeat's numbers; null before the first */
  load: LoadMetrics.nullable(),
});
export type ConnectedWorkerView = z.infer<typeof ConnectedWorkerView>;
