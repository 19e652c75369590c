// The transition tables of builds and evaluations (spec, "States and transitions"; docs/builds.md),
// written once as xstate machines. A queued build of a 50,000-derivation evaluation is a row, not
// a running actor, so these machines are not spawned per row: every status or phase change
// (services/builds/buildStatus.ts, services/builds/evaluationPhases.ts) asks them whether the move exists, and
// the row update is the effect. In-flight work runs as actors (actors/workerJob.ts).
import { setup, transition, type AnyStateMachine } from 'xstate';

type BuildStatus = 'queued' | 'started' | 'completed' | 'failed' | 'substituted' | 'aborted';
type EvaluationPhase = 'queued' | 'waiting' | 'approval_granted' | 'fetching' | 'evaluating' | 'building' | 'completed' | 'failed' | 'aborted';

/** The event that moves a build into each status. */
const BUILD_EVENTS = { queued: 'requeue', started: 'dispatch', completed: 'complete', failed: 'fail', substituted: 'substitute', aborted: 'abort' } as const;

export const buildLifecycle = setup({
  types: { events: {} as { type: (typeof BUILD_EVENTS)[BuildStatus] } },
}).createMachine({
  id: 'build',
  initial: 'queued',
  states: {
    // fail from queued: an input failed (dependency_failed)
    queued: { on: { dispatch: 'started', substitute: 'substituted', fail: 'failed' } },
    // requeue from started: a retry, a lost worker, a refusal, missing inputs
    // abort from started: its only open evaluations were aborted and its job was cancelled
    started: { on: { complete: 'completed', fail: 'failed', requeue: 'queued', abort: 'aborted' } },
    // a cache claimed the outputs but a worker could not fetch them (substitute miss)
    // requeue from substituted or completed: outputs deleted from the last cache that held them
    // (services/builds/evictedOutputs.ts) are built or substituted again when an evaluation reaches them
    substituted: { on: { requeue: 'queued' } },
    completed: { on: { requeue: 'queued' } },
    // requeue from aborted: a later evaluation reaches the derivation again (services/builds/graphRecorder.ts)
    aborted: { on: { requeue: 'queued' } },
    failed: {},
  },
});

/** The event that moves an evaluation into each phase. */
const EVALUATION_EVENTS = {
  queued: 'queue', waiting: 'wait', approval_granted: 'approve', fetching: 'fetch', evaluating: 'evaluate',
  building: 'build', completed: 'complete', failed: 'fail', aborted: 'abort',
} as const;

export const evaluationLifecycle = setup({
  types: { events: {} as { type: (typeof EVALUATION_EVENTS)[EvaluationPhase] } },
}).createMachine({
  id: 'evaluation',
  initial: 'queued',
  states: {
    queued: { on: { wait: 'waiting', evaluate: 'evaluating', fetch: 'fetching', fail: 'failed', abort: 'aborted' } },
    // no writable cache subscription, or every writable cache nearly full
    waiting: { on: { queue: 'queued', abort: 'aborted' } },
    approval_granted: { on: { queue: 'queued', abort: 'aborted' } },
    fetching: { on: { evaluate: 'evaluating', queue: 'queued', fail: 'failed', abort: 'aborted' } },
    // queue: a lost worker, a refusal, a transient failure retried
    evaluating: { on: { build: 'building', queue: 'queued', fail: 'failed', abort: 'aborted' } },
    building: { on: { complete: 'completed', fail: 'failed', abort: 'aborted' } },
    completed: {},
    failed: {},
    aborted: {},
  },
});

function allows(machine: AnyStateMachine, event: string, from: string, to: string): boolean {
  const snapshot = machine.resolveState({ value: from, context: {} });
  if (!snapshot.can({ type: event })) return false;
  return transition(machine, snapshot, { type: event })[0].value === to;
}

/** Throws when a caller asks for a build move the lifecycle does not have (a bug, never input). */
export function checkBuildMove(from: readonly BuildStatus[], to: BuildStatus): void {
  for (const f of from) {
    if (!allows(buildLifecycle, BUILD_EVENTS[to], f, to)) throw new Error(`a build cannot move from ${f} to ${to} (actors/lifecycles.ts)`);
  }
}

export function checkEvaluationMove(from: readonly EvaluationPhase[], to: EvaluationPhase): void {
  for (const f of from) {
    if (!allows(evaluationLifecycle, EVALUATION_EVENTS[to], f, to)) throw new Error(`an evaluation cannot move from ${f} to ${to} (actors/lifecycles.ts)`);
  }
}
