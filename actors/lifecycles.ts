// The lifecycles of builds and evaluations (spec, "States and transitions"; docs/builds.md): the
// events that move them, the guards that decide where a failure leads, and the retry policy,
// written once as xstate machines. A queued build of a 50,000-derivation evaluation is a row, not
// a running actor, so these machines are not spawned per row: a status or phase write
// (services/builds/buildStatus.ts, services/builds/evaluationPhases.ts) names an event, asks the machine which
// statuses it moves the row from and to, and the guarded row update is the effect. In-flight work
// runs as actors (actors/workerJob.ts).
import { and, setup, transition, type AnyStateMachine } from 'xstate';
import type { BuildStatus, EvaluationPhase, FailureClass } from '../protocol/index.js';

/** Why a build or evaluation goes back to the queue without having failed itself. */
export type BuildRequeueWhy =
  /** its worker's connection was lost, the worker refused the job, or the process that dispatched it died */
  | 'lost' | 'refused' | 'orphaned'
  /** a cache claimed the outputs but a worker could not fetch them */
  | 'substitute_miss'
  /** its outputs were deleted from the last cache that held them and an evaluation reaches it again */
  | 'evicted'
  /** aborted with another evaluation, and a later evaluation reaches the derivation again */
  | 'reached_again'
  /** failed, and a restart of an evaluation (POST /evals/{id} restart) reaches it: try again */
  | 'restarted'
  /**
   * completed on an organization's build server, which only that organization trusts, and wanted
   * by another organization's evaluation: built again for it (docs/builds.md, "Whose completion")
   */
  | 'other_tenant';

export type BuildEvent =
  | { type: 'dispatch' }
  | { type: 'substitute' }
  | { type: 'succeed' }
  /**
   * queued again for other tenants only, and none of them wants it any more: completed or failed
   * as it was (docs/builds.md, "Whose completion")
   */
  | { type: 'restore'; to: 'completed' | 'failed' }
  | { type: 'fail'; class: FailureClass; reason: string }
  | { type: 'requeue'; why: BuildRequeueWhy }
  | { type: 'abort' };

/** What the guards of a failure look at: the row's attempts and the limits of build.* settings. */
export interface BuildContext {
  /** the attempt that failed (1-based) */
  attempts: number;
  /** build.maxAttempts */
  maxAttempts: number;
  /** how often the build already went back to wait for its inputs */
  inputsLoops: number;
  /** build.inputsUnavailableMaxLoops */
  maxInputsLoops: number;
}

/** No attempts or loops left: a failure without context is final (a write that only names the event). */
const FINAL_CONTEXT: BuildContext = { attempts: 0, maxAttempts: 0, inputsLoops: 0, maxInputsLoops: 0 };

type Failure = { class: FailureClass; reason: string };
const failureOf = (event: { type: string }): Failure | null => (event.type === 'fail' ? (event as Failure & { type: 'fail' }) : null);
const whyOf = (event: { type: string }): string | null => (event.type === 'requeue' ? (event as { type: string; why: string }).why : null);

/** Only FailedTransient is retried (spec, "Build failure outcomes"). */
export const retryable = (failure: Failure): boolean => failure.class === 'FailedTransient';
export const attemptsLeft = (context: Pick<BuildContext, 'attempts' | 'maxAttempts'>): boolean => context.attempts < context.maxAttempts;
/** The worker could not get the inputs, and the build has not waited for them too often yet (build.inputsUnavailableMaxLoops). */
export const inputsUnavailable = (context: BuildContext, failure: Failure): boolean =>
  failure.reason === 'inputs_unavailable' && context.inputsLoops < context.maxInputsLoops;

export const buildLifecycle = setup({
  types: { context: {} as BuildContext, events: {} as BuildEvent },
  guards: {
    retryable: ({ event }) => failureOf(event) !== null && retryable(failureOf(event)!),
    attemptsLeft: ({ context }) => attemptsLeft(context),
    inputsUnavailable: ({ context, event }) => failureOf(event) !== null && inputsUnavailable(context, failureOf(event)!),
    inputFailed: ({ event }) => failureOf(event)?.reason === 'dependency_failed',
    workerGone: ({ event }) => ['lost', 'refused', 'orphaned'].includes(whyOf(event) ?? ''),
    outputsMissing: ({ event }) => whyOf(event) === 'substitute_miss' || whyOf(event) === 'evicted',
    evicted: ({ event }) => whyOf(event) === 'evicted',
    reachedAgain: ({ event }) => whyOf(event) === 'reached_again',
    restarted: ({ event }) => whyOf(event) === 'restarted',
    otherTenant: ({ event }) => whyOf(event) === 'other_tenant',
    restoresFailure: ({ event }) => event.type === 'restore' && event.to === 'failed',
    restoresCompletion: ({ event }) => event.type === 'restore' && event.to === 'completed',
  },
}).createMachine({
  id: 'build',
  initial: 'queued',
  context: FINAL_CONTEXT,
  states: {
    // fail from queued: an input failed (dependency_failed)
    // abort from queued: POST /builds/{id} abort of it or of an input it waits for (services/builds/buildControl.ts)
    // restore from queued: queued again for other tenants only (other_tenant), none of whom still wants it
    queued: { on: { dispatch: 'started', substitute: 'substituted', restore: [{ guard: 'restoresFailure', target: 'failed' }, { target: 'completed' }], fail: { guard: 'inputFailed', target: 'failed' }, abort: 'aborted' } },
    started: {
      on: {
        succeed: 'completed',
        // the inputs first (they are not the build's fault), then a transient failure with attempts left;
        // an input's failure leaves a running build alone (it started after all its inputs ended)
        fail: [
          { guard: 'inputFailed' },
          { guard: 'inputsUnavailable', target: 'queued' },
          { guard: and(['retryable', 'attemptsLeft']), target: 'queued' },
          { target: 'failed' },
        ],
        requeue: { guard: 'workerGone', target: 'queued' },
        // its only open evaluations were aborted and its job was cancelled
        abort: 'aborted',
      },
    },
    // outputs deleted from the last cache that held them (services/caches/evictedOutputs.ts) are built or
    // substituted again when an evaluation reaches them
    substituted: { on: { requeue: { guard: 'outputsMissing', target: 'queued' } } },
    completed: { on: { requeue: [{ guard: 'evicted', target: 'queued' }, { guard: 'otherTenant', target: 'queued' }] } },
    aborted: { on: { requeue: { guard: 'reachedAgain', target: 'queued' } } },
    // other_tenant: failed on a worker only some organizations trust, and wanted by another (docs/builds.md, "Whose failure")
    // restore from failed: that failure came after another organization's completion, which stands again once no one else builds it
    failed: { on: { requeue: [{ guard: 'restarted', target: 'queued' }, { guard: 'otherTenant', target: 'queued' }], restore: { guard: 'restoresCompletion', target: 'completed' } } },
  },
});

export type EvaluationRequeueWhy =
  /** a writable cache has room again (it waited for one) */
  | 'room'
  /** its subscription was approved */
  | 'approved'
  | 'lost' | 'refused' | 'orphaned';

export type EvaluationEvent =
  | { type: 'wait' }
  | { type: 'requeue'; why: EvaluationRequeueWhy }
  /** a member approved an evaluation parked for approval (docs/git-hosts.md, "Approval") */
  | { type: 'approve' }
  | { type: 'fetch' }
  | { type: 'dispatch' }
  | { type: 'succeed' }
  | { type: 'fail'; class: FailureClass; reason: string }
  /** the server fails it without a job (queued, or building) */
  | { type: 'reject' }
  | { type: 'complete' }
  | { type: 'abort' };

export type EvaluationContext = Pick<BuildContext, 'attempts' | 'maxAttempts'>;

export const evaluationLifecycle = setup({
  types: { context: {} as EvaluationContext, events: {} as EvaluationEvent },
  guards: {
    retryable: ({ event }) => failureOf(event) !== null && retryable(failureOf(event)!),
    attemptsLeft: ({ context }) => attemptsLeft(context),
    room: ({ event }) => whyOf(event) === 'room',
    approved: ({ event }) => whyOf(event) === 'approved',
    workerGone: ({ event }) => ['lost', 'refused', 'orphaned'].includes(whyOf(event) ?? ''),
  },
}).createMachine({
  id: 'evaluation',
  initial: 'queued',
  context: { attempts: 0, maxAttempts: 0 },
  states: {
    // wait: no writable cache subscription, or every writable cache nearly full
    queued: { on: { wait: 'waiting', dispatch: 'evaluating', fetch: 'fetching', reject: 'failed', abort: 'aborted' } },
    waiting: { on: { requeue: { guard: 'room', target: 'queued' }, approve: 'approval_granted', abort: 'aborted' } },
    approval_granted: { on: { requeue: { guard: 'approved', target: 'queued' }, abort: 'aborted' } },
    fetching: {
      on: {
        dispatch: 'evaluating', requeue: { guard: 'workerGone', target: 'queued' }, abort: 'aborted',
        fail: [{ guard: and(['retryable', 'attemptsLeft']), target: 'queued' }, { target: 'failed' }],
      },
    },
    evaluating: {
      on: {
        succeed: 'building', requeue: { guard: 'workerGone', target: 'queued' }, abort: 'aborted',
        fail: [{ guard: and(['retryable', 'attemptsLeft']), target: 'queued' }, { target: 'failed' }],
      },
    },
    // complete: every build of the evaluation has ended
    building: { on: { complete: 'completed', reject: 'failed', abort: 'aborted' } },
    completed: {},
    failed: {},
    aborted: {},
  },
});

/** A move an event makes: from any of `from` to `to`. */
export interface Move<S extends string> {
  from: S[];
  to: S;
}

/**
 * The move the event makes in the machine under `context`: the states it leaves and the one it
 * reaches. Every event leads to one state, so a row write is one guarded update; an event no state
 * accepts, or one that would lead to two, is a bug in the caller or the machine and throws.
 */
function moveOf<S extends string>(machine: AnyStateMachine, states: readonly S[], event: { type: string }, context: object): Move<S> {
  const from: S[] = [];
  let to: S | null = null;
  for (const state of states) {
    const snapshot = machine.resolveState({ value: state, context });
    if (!snapshot.can(event)) continue;
    const next = transition(machine, snapshot, event)[0].value as S;
    if (next === state) continue;
    if (to !== null && next !== to) throw new Error(`the event ${JSON.stringify(event)} leads to both ${to} and ${next} (actors/lifecycles.ts)`);
    to = next;
    from.push(state);
  }
  if (to === null) throw new Error(`no state accepts the event ${JSON.stringify(event)} (actors/lifecycles.ts)`);
  return { from, to };
}

const BUILD_STATUSES: readonly BuildStatus[] = ['queued', 'started', 'completed', 'failed', 'substituted', 'aborted'];
const EVALUATION_PHASES: readonly EvaluationPhase[] = ['queued', 'waiting', 'approval_granted', 'fetching', 'evaluating', 'building', 'completed', 'failed', 'aborted'];

/** Moves of events without context or failure (dispatch, succeed, substitute, requeue, abort): the scheduler asks for them per batch. */
const simpleBuildMoves = new Map<string, Move<BuildStatus>>();

/** The move a build event makes; a failure's target depends on `context` (without one, a failure is final). */
export function buildMove(event: BuildEvent, context: Partial<BuildContext> = {}): Move<BuildStatus> {
  if (event.type === 'fail' || Object.keys(context).length > 0) return moveOf(buildLifecycle, BUILD_STATUSES, event, { ...FINAL_CONTEXT, ...context });
  const key = event.type === 'requeue' ? `requeue:${event.why}` : event.type === 'restore' ? `restore:${event.to}` : event.type;
  let move = simpleBuildMoves.get(key);
  if (!move) simpleBuildMoves.set(key, (move = moveOf(buildLifecycle, BUILD_STATUSES, event, FINAL_CONTEXT)));
  return { from: [...move.from], to: move.to };
}

export function evaluationMove(event: EvaluationEvent, context: Partial<EvaluationContext> = {}): Move<EvaluationPhase> {
  return moveOf(evaluationLifecycle, EVALUATION_PHASES, event, { attempts: 0, maxAttempts: 0, ...context });
}

/** spec, build.retryBackoffSecs: the wait after failed attempt `attempt` (1-based), doubled for every earlier attempt. */
export const retryBackoffMs = (retryBackoffSecs: number, attempt: number): number => retryBackoffSecs * 1000 * 2 ** (attempt - 1);

/**
 * What follows a started build's failure: `awaitInputs` (back to the queue, the attempt not
 * counted, until the inputs a cache claimed are there), `retry` after a backoff, or `fail` (and
 * the builds that need it fail with it).
 */
export type BuildOutcome = { kind: 'awaitInputs' } | { kind: 'retry'; backoffMs: number } | { kind: 'fail' };

export function decideBuildOutcome(context: BuildContext, failure: Failure, retryBackoffSecs: number): BuildOutcome {
  const started = buildLifecycle.resolveState({ value: 'started', context });
  const [next] = transition(buildLifecycle, started, { type: 'fail', ...failure });
  if (next.value === 'failed') return { kind: 'fail' };
  if (inputsUnavailable(context, failure)) return { kind: 'awaitInputs' };
  return { kind: 'retry', backoffMs: retryBackoffMs(retryBackoffSecs, context.attempts) };
}
