// What a build's status change sets off, for the scheduler: the guarded row update and its events
// (buildStatus.ts), the evaluations' progress, the end of a build's progress reports, failing the
// builds that wait on a failed one, and completing evaluations whose builds are all done. What a
// failure leads to (wait for the inputs, retry after a backoff, fail) is the lifecycle's decision
// (decideBuildOutcome, actors/lifecycles.ts); this file carries it out. Results that arrive
// together complete in one transaction.
import type { Sql } from 'postgres';
import type { JobFailure } from '../../protocol/index.js';
import type { Events } from '../../storage/index.js';
import type { BuildProgressReporter } from './buildProgress.js';
import type { Clock } from '../../supervisors/index.js';
import { decideBuildOutcome, type BuildContext } from '../../actors/index.js';
import { applyStatusChanges, changeBuildStatus, changeBuildStatusLocked, changeBuildStatuses, type StatusChange } from './buildStatus.js';
import { requeuedForOthers, restorable } from './tenantScope.js';
import { exhausted, recordSpentAttempt, spentAttempts, spentFor } from './attemptScopes.js';
import { insertBuildSamples, type TimedSample } from './buildStatistics.js';
import { changePhase } from './evaluationPhases.js';
import type { EvaluationProgress } from './evaluationProgress.js';
import { countInputsLoop, countSubstituteMisses, inputsLoops } from './freeRequeues.js';
import { finishedEvaluations, queuedDependents, type ReadiedBuild } from './schedulerQueries.js';

export interface LogSizes {
  logBytes: number;
  logDroppedBytes: number;
}

export interface RetryPolicy {
  /** build.maxAttempts */
  maxAttempts: number;
  /** build.retryBackoffSecs: the wait before a retry, doubled per earlier attempt */
  retryBackoffSecs: number;
  /** build.inputsUnavailableMaxLoops */
  inputsUnavailableMaxLoops: number;
  /** the time a retry's not_before counts from (the scheduler compares it with the same clock) */
  clock: Clock;
}

export class BuildOutcomes {
  /** build results waiting for the next batch (completeSoon) */
  private completions: { id: string; change: StatusChange; sample: TimedSample | null }[] = [];
  private completing: Promise<void> | null = null;
  /** the batch whose transaction runs now */
  private committing: Promise<void> = Promise.resolve();
  /** the batches' checks of their evaluations after the commit (settle waits for them) */
  private readonly finishing = new Set<Promise<void>>();

  constructor(
    private readonly sql: Sql,
    private readonly events: Events,
    private readonly evaluationProgress: EvaluationProgress,
    private readonly buildProgress: BuildProgressReporter,
    /** called after a batch of completions: builds waiting on them may be ready */
    private readonly wake: () => void,
    private readonly retry: RetryPolicy,
    /** the queued builds whose last open input a change here closed (the ready queue) */
    private readonly readied: (builds: ReadiedBuild[]) => void = () => undefined,
  ) {}

  /** Every build status change of the scheduler: the row and its events, then the evaluations' progress. */
  async setStatus(derivationBuildId: string, change: StatusChange): Promise<number | null> {
    const applied = await changeBuildStatus(this.events, derivationBuildId, { readied: this.readied, ...change });
    if (applied !== null) this.evaluationProgress.touched(derivationBuildId);
    if (applied !== null && change.event.type !== 'dispatch') this.buildProgress.forget(derivationBuildId);
    return applied;
  }

  /**
   * Several builds started in one transaction, each with the projects its worker serves (null: an
   * open-mode worker, kiln's own), which scope its outcome; the attempt of each, or null where it was
   * not queued.
   */
  async startAll(starts: readonly { id: string; workerId: string; projects: readonly string[] | null }[]): Promise<(number | null)[]> {
    const attempts = await changeBuildStatuses(this.events, starts.map(({ id, workerId, projects }) => ({
      id, change: { event: { type: 'dispatch' as const }, workerId, workerProjects: projects },
    })));
    starts.forEach(({ id }, i) => {
      if (attempts[i] !== null && attempts[i] !== undefined) this.evaluationProgress.touched(id);
    });
    return attempts;
  }

  /** Builds a cache holds the outputs of, substituted in one transaction; the ids it applied to. */
  async substituteAll(derivationBuildIds: readonly string[]): Promise<string[]> {
    const applied = await changeBuildStatuses(this.events, derivationBuildIds.map((id) => ({
      id, change: { event: { type: 'substitute' as const }, readied: this.readied },
    })));
    const done = derivationBuildIds.filter((_, i) => applied[i] !== null && applied[i] !== undefined);
    this.evaluationProgress.touched(...done);
    for (const id of done) this.buildProgress.forget(id);
    return done;
  }

  /**
   * Builds queued again for other tenants only (tenantScope.ts), none of whom wants them any more
   * (their building evaluations of it ended): completed or failed again as they were, standing for
   * the organizations they stood for (a failure's dependents fail with it); the ids it restored.
   * The scheduler's leader runs it after each full pass (and wakes another when it restored any: the
   * ready queue reads what they readied); it reads the candidates by their partial index.
   */
  async restoreAbandoned(limit = 500): Promise<string[]> {
    const candidates = (await requeuedForOthers(this.sql, limit)).map((r) => r.id);
    if (candidates.length === 0) return [];
    // Checked under the rows' locks (tenantScope.ts); the dependents it readies are read by the pass the caller wakes.
    const restored = await this.events.transaction(async (tx, emit) => {
      const rows = await restorable(tx, candidates);
      const to = (target: string) => rows.filter((r) => r.to === target).map((r) => r.id);
      return {
        completed: await applyStatusChanges(tx, emit, to('completed'), { event: { type: 'restore', to: 'completed' } }),
        failed: await applyStatusChanges(tx, emit, to('failed'), { event: { type: 'restore', to: 'failed' } }),
      };
    });
    const done = [...restored.completed, ...restored.failed];
    this.evaluationProgress.touched(...done);
    for (const id of restored.failed) await this.failDependents(id);
    await this.finishEvaluations({ derivationBuilds: done });
    return done;
  }

  /**
   * A successful build, completed with the others that arrive in the same event-loop turn. Its
   * resource sample (when the worker sent one) is written in the same transaction: a completed
   * build is never seen without it, and the completion waits for no other connection's insert.
   */
  completeSoon(derivationBuildId: string, logSizes: LogSizes, sample: TimedSample | null = null): Promise<void> {
    this.completions.push({ id: derivationBuildId, change: { event: { type: 'succeed' }, readied: this.readied, ...logSizes }, sample });
    this.completing ??= (async () => {
      await new Promise<void>((resolve) => setImmediate(resolve));
      // One batch at a time: this one waits for the one under way (and grows meanwhile), so two
      // batches of this process never contend for the same dependents' readiness counters.
      await this.committing;
      const batch = this.completions.splice(0);
      this.completing = null;
      const commit = this.commit(batch);
      // the next batch waits for this one's transaction only, not for the evaluations' check after it
      this.committing = commit.then(() => undefined, () => undefined);
      const done = await commit;
      // the next pass first: what these made ready waits for no evaluation's completion check
      this.wake();
      const finishing = this.finishEvaluations({ derivationBuilds: done });
      this.finishing.add(finishing);
      await finishing.finally(() => this.finishing.delete(finishing));
    })();
    return this.completing;
  }

  /** The batch's transaction: the builds it completed. */
  private async commit(batch: readonly { id: string; change: StatusChange; sample: TimedSample | null }[]): Promise<string[]> {
    // one sample an attempt: a second in one statement would fail the upsert, and the batch with it
    const samples = [...new Map(batch.flatMap((c) => (c.sample === null ? [] : [[`${c.sample.sample.derivationBuildId}:${c.sample.sample.attempt}`, c.sample] as const]))).values()];
    const applied = await changeBuildStatuses(this.events, batch, samples.length === 0 ? undefined : (tx) => insertBuildSamples(tx, samples));
    const done = batch.filter((_, i) => applied[i] !== null).map((c) => c.id);
    this.evaluationProgress.touched(...done);
    for (const id of done) this.buildProgress.forget(id);
    return done;
  }

  /**
   * Attempt `attempt` (its dispatch number) failed; the lifecycle decides what follows. Waiting for inputs: the inputs a
   * cache claimed (substituted) are the suspects, they go back to the queue counted as substitute
   * misses (past build.substituteMissEscalationThreshold they are built instead), and the build
   * waits for them without the attempt counting. A retry waits for its backoff. A failure fails
   * the builds that need it too. The suspects sent back to the queue.
   */
  async failed(derivationBuildId: string, attempt: number, failure: JobFailure, logSizes: Partial<LogSizes>): Promise<string[]> {
    const { maxAttempts, retryBackoffSecs, inputsUnavailableMaxLoops, clock } = this.retry;
    // the loop count matters only to a missing-inputs failure: the others skip the read
    const loops = failure.reason === 'inputs_unavailable' ? await inputsLoops(this.sql, derivationBuildId) : 0;
    let awaiting: StatusChange | null = null;
    let failsDependents = false;
    // Read, recorded and decided under the row's lock, only while the row is at this attempt: a
    // stale report (the build dispatched again since) changes nothing.
    const applied = await changeBuildStatusLocked(this.events, derivationBuildId, async (tx) => {
      const [row] = await tx<{ status: string; attempts: number }[]>`select status, attempts from derivation_builds where id = ${derivationBuildId}`;
      if (row?.status !== 'started' || row.attempts !== attempt) return null;
      // The retry limit and backoff count the attempts spent (the ledger's), each organization its
      // own: a tenant's worker's attempts count against its organizations only (attemptScopes.ts).
      const spent = await spentAttempts(tx, derivationBuildId, attempt);
      const context: BuildContext = { attempts: spentFor(spent, spent.workerScope), maxAttempts, inputsLoops: loops, maxInputsLoops: inputsUnavailableMaxLoops };
      const outcome = decideBuildOutcome(context, failure, retryBackoffSecs);
      const change: StatusChange = { event: { type: 'fail', class: failure.class, reason: failure.reason }, context, failure, attempt, readied: this.readied, ...logSizes };
      if (outcome.kind === 'awaitInputs') {
        awaiting = change; // the attempt is given back: nothing recorded
        return null;
      }
      await recordSpentAttempt(tx, derivationBuildId, attempt);
      failsDependents = true;
      if (outcome.kind !== 'retry') return change;
      const notBefore = new Date(clock.now().getTime() + outcome.backoffMs);
      // Attempts left for the worker's organizations (for everyone, on kiln's own worker), but some
      // organization this attempt counted for has now spent build.maxAttempts: the build fails for
      // it alone, and goes back to the queue for the others after the same wait.
      const spentOut = exhausted(spent, maxAttempts, spent.failedFor, spent.workerScope);
      failsDependents = spentOut.length > 0;
      return spentOut.length === 0 ? { ...change, notBefore } : { ...change, context: { ...context, attempts: maxAttempts }, exhaustedFor: spentOut, notBefore };
    });
    if (applied !== null) {
      this.evaluationProgress.touched(derivationBuildId);
      this.buildProgress.forget(derivationBuildId);
      if (failsDependents) await this.failDependents(derivationBuildId);
      return [];
    }
    if (awaiting === null) return [];
    const suspects = await countSubstituteMisses(this.sql, derivationBuildId);
    for (const id of suspects) await this.setStatus(id, { event: { type: 'requeue', why: 'substitute_miss' } });
    // Without a suspect nothing changes until time passes (a push still landing, a cache coming back).
    const notBefore = suspects.length > 0 ? null : new Date(clock.now().getTime() + retryBackoffSecs * 1000);
    await this.setStatus(derivationBuildId, { ...(awaiting as StatusChange), notBefore });
    await countInputsLoop(this.sql, derivationBuildId);
    return suspects;
  }

  /** A cluster job's attempt aborted by its placement (a member refused or failed its part): spent, on the worker's scope. */
  async abortedAttempt(derivationBuildId: string, attempt: number): Promise<void> {
    await recordSpentAttempt(this.sql, derivationBuildId, attempt);
  }

  /**
   * A worker was lost while attempt `attempt` of the build ran there. A loss goes back to the queue at once
   * ('requeue') unless it was the last of build.maxAttempts: then the build fails ('failed'), so one that takes
   * every worker down with it (out of memory, a full disk) ends instead of going round for ever. 'stale': the
   * build is no longer at that attempt (aborted, or dispatched again since), so the loss changes nothing.
   */
  async lostWhileBuilding(derivationBuildId: string, attempt: number): Promise<'requeue' | 'failed' | 'stale'> {
    const [row] = await this.sql<{ attempts: number; status: string }[]>`
      select attempts, status from derivation_builds where id = ${derivationBuildId}`;
    if (row === undefined || row.status !== 'started' || row.attempts !== attempt) return 'stale';
    const { maxAttempts } = this.retry;
    // as a transient failure counts it (failed): the worker's organizations' attempts, or everyone's on kiln's own worker
    const spent = await spentAttempts(this.sql, derivationBuildId, attempt);
    const own = spentFor(spent, spent.workerScope);
    if (own < maxAttempts && exhausted(spent, maxAttempts, spent.failedFor, spent.workerScope).length === 0) {
      await recordSpentAttempt(this.sql, derivationBuildId, attempt);
      return 'requeue';
    }
    const message = `the worker's connection ended while it built this derivation, on ${Math.max(own, maxAttempts)} attempts of build.maxAttempts ${maxAttempts}: the build may take its worker down with it (out of memory, a full disk)`;
    await this.failed(derivationBuildId, attempt, { class: 'FailedTransient', reason: 'worker_lost', message }, {});
    return 'failed';
  }

  /**
   * Fails the queued builds that need a failed one, then completes what that finishes. A failure
   * that stands for some organizations only (tenantScope.ts, failed_for) fails the dependents no
   * building evaluation of another organization wants, with the same scope (another organization
   * that starts building them later queues them again for itself); the others wait for the input,
   * queued again for those organizations.
   */
  async failDependents(derivationBuildId: string): Promise<void> {
    const [input] = await this.sql<{ failed_for: string[] | null }[]>`select failed_for from derivation_builds where id = ${derivationBuildId}`;
    const failedFor = input?.failed_for ?? null;
    const dependents = await queuedDependents(this.sql, derivationBuildId, failedFor);
    for (const { id } of dependents) {
      await this.setStatus(id, {
        event: { type: 'fail', class: 'FailedPermanent', reason: 'dependency_failed' },
        failure: { class: 'FailedPermanent', reason: 'dependency_failed', message: `an input of this derivation failed (derivation_build ${derivationBuildId})` },
        ...(failedFor ? { failedFor } : {}),
      });
    }
    await this.finishEvaluations({ derivationBuilds: [derivationBuildId, ...dependents.map((d) => d.id)] });
  }

  /** Completes the building evaluations whose builds have all ended. */
  async finishEvaluations(opts: { derivationBuilds?: string[]; evaluation?: string }): Promise<void> {
    for (const { id } of await finishedEvaluations(this.sql, opts)) {
      await changePhase(this.events, id, { event: { type: 'complete' } });
    }
  }

  /** Waits for a batch of completions under way. */
  async settle(): Promise<void> {
    // a batch that failed has told its callers; settling waits for it all the same
    await Promise.allSettled([this.completing, this.committing]);
    await Promise.allSettled([...this.finishing]);
  }
}
