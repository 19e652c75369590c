// The build and evaluation lifecycles (actors/lifecycles.ts), without a database: the events each
// status or phase accepts and where they lead, the guards that decide where a failure goes, and
// the retry policy (decideBuildOutcome).
import t from 'tap';
import { transition } from 'xstate';
import {
  buildLifecycle, buildMove, decideBuildOutcome, evaluationLifecycle, evaluationMove,
  type BuildContext, type BuildEvent, type EvaluationContext, type EvaluationEvent,
} from '../../actors/index.js';

const NONE_LEFT: BuildContext = { attempts: 0, maxAttempts: 0, inputsLoops: 0, maxInputsLoops: 0 };

function nextBuild(from: string, event: BuildEvent, context: BuildContext = NONE_LEFT): string | null {
  const snapshot = buildLifecycle.resolveState({ value: from, context });
  if (!snapshot.can(event)) return null;
  const to = transition(buildLifecycle, snapshot, event)[0].value as string;
  return to === from ? null : to;
}

function nextEvaluation(from: string, event: EvaluationEvent, context: EvaluationContext = { attempts: 0, maxAttempts: 0 }): string | null {
  const snapshot = evaluationLifecycle.resolveState({ value: from, context });
  if (!snapshot.can(event)) return null;
  const to = transition(evaluationLifecycle, snapshot, event)[0].value as string;
  return to === from ? null : to;
}

const transient = { type: 'fail', class: 'FailedTransient', reason: 'network' } as const;
const permanent = { type: 'fail', class: 'FailedPermanent', reason: 'builder_failed' } as const;
const timeout = { type: 'fail', class: 'FailedTimeout', reason: 'timeout' } as const;
const inputsMissing = { type: 'fail', class: 'FailedTransient', reason: 'inputs_unavailable' } as const;
const inputFailed = { type: 'fail', class: 'FailedPermanent', reason: 'dependency_failed' } as const;

t.test('build events and where they lead', async (t) => {
  t.equal(nextBuild('queued', { type: 'dispatch' }), 'started');
  t.equal(nextBuild('queued', { type: 'substitute' }), 'substituted');
  t.equal(nextBuild('queued', inputFailed), 'failed', 'a queued build fails when an input failed');
  t.equal(nextBuild('queued', permanent), null, 'and for nothing else: it never ran');
  t.equal(nextBuild('started', { type: 'succeed' }), 'completed');
  t.equal(nextBuild('started', inputFailed), null, 'a running build started after its inputs ended');
  t.equal(nextBuild('started', { type: 'abort' }), 'aborted');
  t.equal(nextBuild('queued', { type: 'abort' }), 'aborted', 'a queued build is aborted on its own or with an input (POST /builds/{id})');
  t.equal(nextBuild('queued', { type: 'succeed' }), null, 'nothing completes without starting');
  for (const why of ['lost', 'refused', 'orphaned'] as const) {
    t.equal(nextBuild('started', { type: 'requeue', why }), 'queued', `started → queued: ${why}`);
    t.equal(nextBuild('completed', { type: 'requeue', why }), null, `a completed build is not re-queued for ${why}`);
  }
  t.equal(nextBuild('substituted', { type: 'requeue', why: 'substitute_miss' }), 'queued');
  t.equal(nextBuild('substituted', { type: 'requeue', why: 'evicted' }), 'queued');
  t.equal(nextBuild('completed', { type: 'requeue', why: 'evicted' }), 'queued');
  t.equal(nextBuild('completed', { type: 'requeue', why: 'substitute_miss' }), null, 'a built output was never a cache\'s claim');
  t.equal(nextBuild('aborted', { type: 'requeue', why: 'reached_again' }), 'queued');
  t.equal(nextBuild('started', { type: 'requeue', why: 'reached_again' }), null);
  t.equal(nextBuild('completed', { type: 'requeue', why: 'other_tenant' }), 'queued', 'a build server\'s completion is queued again for another organization');
  t.equal(nextBuild('substituted', { type: 'requeue', why: 'other_tenant' }), null, 'a substitution stands for the projects whose caches hold it');
  t.equal(nextBuild('queued', { type: 'restore', to: 'completed' }), 'completed', 'queued again for other tenants who left: completed as it was');
  t.equal(nextBuild('queued', { type: 'restore', to: 'failed' }), 'failed', 'or failed as it was');
  t.equal(nextBuild('started', { type: 'restore', to: 'completed' }), null);
  t.equal(nextBuild('failed', { type: 'requeue', why: 'other_tenant' }), 'queued', 'a build server\'s failure is queued again for another organization');
  for (const event of [{ type: 'requeue', why: 'evicted' }, { type: 'dispatch' }, transient] as const) {
    t.equal(nextBuild('failed', event, { ...NONE_LEFT, maxAttempts: 9 }), null, `failed is final (${event.type})`);
  }
});

t.test('a started build\'s failure: the guards retryable, attemptsLeft and inputsUnavailable', async (t) => {
  const left: BuildContext = { attempts: 1, maxAttempts: 3, inputsLoops: 0, maxInputsLoops: 2 };
  t.equal(nextBuild('started', transient, left), 'queued', 'transient with attempts left: retried');
  t.equal(nextBuild('started', transient, { ...left, attempts: 3 }), 'failed', 'no attempts left');
  t.equal(nextBuild('started', permanent, left), 'failed', 'FailedPermanent is not retried');
  t.equal(nextBuild('started', timeout, left), 'failed', 'FailedTimeout is not retried');
  t.equal(nextBuild('started', inputsMissing, { ...left, attempts: 3 }), 'queued', 'missing inputs wait whatever the attempts');
  t.equal(nextBuild('started', inputsMissing, { ...left, attempts: 3, inputsLoops: 2 }), 'failed', 'until the loops are used up');
  t.equal(nextBuild('started', inputsMissing, { ...left, inputsLoops: 2 }), 'queued', 'then it is an ordinary transient failure');
});

t.test('decideBuildOutcome', async (t) => {
  const policy: BuildContext = { attempts: 1, maxAttempts: 3, inputsLoops: 0, maxInputsLoops: 2 };
  t.same(decideBuildOutcome(policy, transient, 10), { kind: 'retry', backoffMs: 10_000 }, 'first retry waits retryBackoffSecs');
  t.same(decideBuildOutcome({ ...policy, attempts: 2 }, transient, 10), { kind: 'retry', backoffMs: 20_000 }, 'doubled per earlier attempt');
  t.same(decideBuildOutcome({ ...policy, attempts: 3 }, transient, 10), { kind: 'fail' }, 'the last attempt fails');
  t.same(decideBuildOutcome(policy, permanent, 10), { kind: 'fail' });
  t.same(decideBuildOutcome(policy, timeout, 10), { kind: 'fail' });
  t.same(decideBuildOutcome({ ...policy, attempts: 3 }, inputsMissing, 10), { kind: 'awaitInputs' });
  t.same(decideBuildOutcome({ ...policy, inputsLoops: 2 }, inputsMissing, 10), { kind: 'retry', backoffMs: 10_000 }, 'loops used up: retried as transient');
  t.same(decideBuildOutcome({ ...policy, attempts: 3, inputsLoops: 2 }, inputsMissing, 10), { kind: 'fail' });
});

t.test('buildMove: the statuses a write leaves and the one it reaches', async (t) => {
  t.same(buildMove({ type: 'dispatch' }), { from: ['queued'], to: 'started' });
  t.same(buildMove({ type: 'requeue', why: 'evicted' }), { from: ['completed', 'substituted'], to: 'queued' });
  t.same(buildMove(transient), { from: ['started'], to: 'failed' }, 'without a context a failure is final');
  t.same(buildMove(transient, { attempts: 1, maxAttempts: 2 }), { from: ['started'], to: 'queued' });
  t.same(buildMove(inputFailed), { from: ['queued'], to: 'failed' });
  t.throws(() => buildMove({ type: 'requeue', why: 'room' as 'lost' }), /no state accepts/, 'an event nothing accepts is a bug');
});

t.test('evaluation events', async (t) => {
  t.same(evaluationMove({ type: 'abort' }), { from: ['queued', 'waiting', 'approval_granted', 'fetching', 'evaluating', 'building'], to: 'aborted' }, 'every open phase can be aborted');
  t.equal(nextEvaluation('queued', { type: 'dispatch' }), 'evaluating');
  t.equal(nextEvaluation('queued', { type: 'wait' }), 'waiting');
  t.equal(nextEvaluation('waiting', { type: 'requeue', why: 'room' }), 'queued');
  t.equal(nextEvaluation('waiting', { type: 'requeue', why: 'lost' }), null);
  t.equal(nextEvaluation('evaluating', { type: 'succeed' }), 'building');
  t.equal(nextEvaluation('building', { type: 'complete' }), 'completed');
  t.equal(nextEvaluation('building', { type: 'succeed' }), null);
  t.same(evaluationMove({ type: 'requeue', why: 'orphaned' }), { from: ['fetching', 'evaluating'], to: 'queued' });
  t.equal(nextEvaluation('evaluating', transient, { attempts: 1, maxAttempts: 2 }), 'queued', 'retryable with attempts left');
  t.equal(nextEvaluation('evaluating', transient, { attempts: 2, maxAttempts: 2 }), 'failed');
  t.equal(nextEvaluation('evaluating', permanent, { attempts: 1, maxAttempts: 2 }), 'failed');
  t.equal(nextEvaluation('queued', { type: 'reject' }), 'failed');
  for (const final of ['completed', 'failed', 'aborted']) {
    t.equal(nextEvaluation(final, { type: 'requeue', why: 'lost' }), null, `${final} is final`);
    t.equal(nextEvaluation(final, { type: 'abort' }), null);
  }
});
