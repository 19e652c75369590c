// The job actor: one evaluation or build job handed to one worker, from dispatch to its outcome
// (DESIGN.md, "Actors and supervision"; docs/builds.md). The rows (evaluations,
// derivation_builds) hold the statuses; this machine holds the part only the dispatching process
// knows — which worker has the job and how far the conversation got — and decides which worker
// messages still count: a result after a loss, a second result or a log after the result is
// ignored by the machine, so the scheduler acts on each job's end exactly once.
import { assign, setup, type SnapshotFrom } from 'xstate';

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

export const workerJobMachine = setup({
  types: { context: {} as WorkerJobContext, events: {} as WorkerJobEvent, input: {} as WorkerJobInput },
  actions: {
    recordFailure: assign({ failure: ({ event }) => (event.type === 'failed' ? event.reason : null) }),
    addProgress: assign({ progress: ({ context, event }) => context.progress + (event.type === 'progress' ? event.amount : 0) }),
  },
}).createMachine({
  id: 'worker-job',
  context: ({ input }) => ({ ...input, progress: 0, failure: null }),
  initial: 'dispatched',
  states: {
    dispatched: {
      on: {
        accepted: 'running',
        // streaming implies acceptance: a job must not hang on its jobAccepted
        progress: { target: 'running', actions: 'addProgress' },
        succeeded: { target: 'succeeded' },
        failed: { target: 'failed', actions: 'recordFailure' },
        refused: { target: 'refused' },
        lost: { target: 'lost' },
        cancelled: { target: 'cancelled' },
      },
    },
    running: {
      on: {
        progress: { actions: 'addProgress' },
        succeeded: { target: 'succeeded' },
        failed: { target: 'failed', actions: 'recordFailure' },
        lost: { target: 'lost' },
        cancelled: { target: 'cancelled' },
      },
    },
    succeeded: { type: 'final' },
    failed: { type: 'final' },
    refused: { type: 'final' },
    lost: { type: 'final' },
    cancelled: { type: 'final' },
  },
});

export type WorkerJobMachine = typeof workerJobMachine;
export type WorkerJobSnapshot = SnapshotFrom<WorkerJobMachine>;

export const summarizeWorkerJob = (snapshot: WorkerJobSnapshot) => {
  const c = snapshot.context;
  return { kind: c.kind, worker: c.workerId, subject: c.subject, attempt: c.attempt, progress: c.progress, dispatched_at: new Date(c.dispatchedAt).toISOString() };
};
