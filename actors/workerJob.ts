// The job actor: one evaluation or build job handed to one worker, from dispatch to its outcome
// (DESIGN.md, "Actors and supervision"; docs/builds.md). The rows (evaluations,
// derivation_builds) hold the statuses; this machine holds the part only the dispatching process
// knows — which worker has the job and how far the conversation got — and decides which worker
// messages still count: a result after a loss, a second result or a log after the result is
// ignored by the machine, so the scheduler acts on each job's end exactly once.
export interface WorkerJobInput {
  kind: 'eval' | 'build';
  jobId: string;
  workerId: string;
  /** the evaluation (eval jobs) or the derivation_build (build jobs) */
  subject: string;
  attempt: number;
  /** epoch ms */
  dispatchedAt: number;
}

export interface WorkerJobContext extends WorkerJobInput {
  /** log bytes (builds) or derivations (evaluations) received so far */
  progress: number;
  /** the failure reason the worker gave */
  failure: string | null;
}

export type WorkerJobEvent =
  | { type: 'accepted' }
  | { type: 'progress'; amount: number }
  | { type: 'succeeded' }
  | { type: 'failed'; reason: string }
  | { type: 'refused' }
  /** the worker's connection ended before the job did */
  | { type: 'lost' }
  /** the server gave the job up (an abort, or this process stopped dispatching) */
  | { type: 'cancelled' };

export type WorkerJobState = 'dispatched' | 'running' | 'succeeded' | 'failed' | 'refused' | 'lost' | 'cancelled';

/** The job's transitions: state → event → next state. What a state does not list, it ignores. */
const TRANSITIONS: Record<WorkerJobState, Partial<Record<WorkerJobEvent['type'], WorkerJobState>>> = {
  dispatched: {
    accepted: 'running',
    // streaming implies acceptance: a job must not hang on its jobAccepted
    progress: 'running',
    succeeded: 'succeeded', failed: 'failed', refused: 'refused', lost: 'lost', cancelled: 'cancelled',
  },
  // refused while running: a build the worker gave back after all, its store holding paths the job may
  // not use that another build still uses (docs/builds.md, "The shared store")
  running: { progress: 'running', succeeded: 'succeeded', failed: 'failed', refused: 'refused', lost: 'lost', cancelled: 'cancelled' },
  succeeded: {}, failed: {}, refused: {}, lost: {}, cancelled: {},
};

/**
 * One per dispatched job, thousands a second in a large build farm: a plain transition function
 * that the supervisor runs as a light actor (supervisors/lightActor.ts), not an xstate machine,
 * whose creation and steps cost more than the dispatch itself (bench/README.md, dispatch).
 */
export const workerJobMachine = {
  initial: 'dispatched' as WorkerJobState,
  final: new Set<WorkerJobState>(['succeeded', 'failed', 'refused', 'lost', 'cancelled']) as ReadonlySet<WorkerJobState>,
  context: (input: WorkerJobInput): WorkerJobContext => ({ ...input, progress: 0, failure: null }),
  step(state: WorkerJobState, context: WorkerJobContext, event: WorkerJobEvent): { state: WorkerJobState; context: WorkerJobContext } | null {
    const next = TRANSITIONS[state][event.type];
    if (next === undefined) return null;
    if (event.type === 'progress') return { state: next, context: { ...context, progress: context.progress + event.amount } };
    if (event.type === 'failed') return { state: next, context: { ...context, failure: event.reason } };
    return { state: next, context };
  },
};

export const summarizeWorkerJob = (_state: WorkerJobState, c: WorkerJobContext) => (
  { kind: c.kind, worker: c.workerId, subject: c.subject, attempt: c.attempt, progress: c.progress, dispatched_at: new Date(c.dispatchedAt).toISOString() });
