// Where the scheduler's work goes (docs/builds.md, "Scheduler rules"): queued evaluations to
// eval-capable workers, waiting ones back to the queue when a cache has room; ready builds either
// substituted (a readable cache has the outputs) or placed on the best-ranked worker whose
// architectures and system features fit, then started in one transaction and sent. Only workers
// connected to this process are candidates; the guarded status change lets one process win a job.
// Builds that need several workers at once go to clusterPlacement.ts.
import type { Sql } from 'postgres';
import type { Logger } from 'pino';
import { clusterSize, isPlacementFeature, type RepositoryAccess } from '../../protocol/index.js';
import type { Events, KilnMetrics, PhaseSampleBuffer } from '../../storage/index.js';
import type { BuildOutcomes } from './buildOutcomes.js';
import { buildJobMessage, targetCaches, type BuildJobSettings } from './buildJobMessage.js';
import type { Clock } from '../../supervisors/index.js';
import type { CacheStorageLimits } from '../caches/index.js';
import { changePhase } from './evaluationPhases.js';
import { jobSourceUrl } from './sourceUploads.js';
import { mintInputCache } from './evalInputCache.js';
import { evaluationWaitReason } from './evaluationWait.js';
import { outputsCached, projectCaches, readable, type OutputsQuestion, type ProjectCache } from '../caches/index.js';
import type { JobTable } from './schedulerJobs.js';
import type { ReadyQueue } from './readyQueue.js';
import { queuedEvaluations, type QueuedEvaluation, type ReadyBuild } from './schedulerQueries.js';
import type { ConnectedWorker, WorkerConnections } from '../workers/index.js';
import { bestWorker, type ScoringPolicy } from '../workers/index.js';
import { memoryFits, PeakMemoryHistory, reservedMemory } from './memoryReservations.js';
import { ClusterPlacement, type ClusterSettings } from './clusterPlacement.js';
import type { BuildJobEntry } from './schedulerJobs.js';
import { BuildDeclines } from './buildDeclines.js';

/** How long a worker that refused a job it had not taken gets no other. */
const REFUSAL_PAUSE_MS = 2000;
/**
 * Open mode is granted only to the local worker (services/workers/workerAuth.ts), which serves every active
 * project, including those created after it connected.
 */
const serves = (worker: ConnectedWorker, projectId: string) => worker.open || worker.projects.includes(projectId);

export interface PlacementSettings extends Omit<BuildJobSettings, 'readToken'>, ClusterSettings {
  substituteMissEscalationThreshold: number;
  scoringPolicy: ScoringPolicy;
  /** cache.maxStorageGb: when non-zero, new evaluations wait while every writable cache is nearly full */
  maxStorageGb: number;
}

export interface BuildPlacementDeps {
  sql: Sql;
  events: Events;
  workers: WorkerConnections;
  jobs: JobTable;
  outcomes: BuildOutcomes;
  /** the ready builds in memory (readyQueue.ts) */
  ready: ReadyQueue;
  storage: CacheStorageLimits;
  readToken: BuildJobSettings['readToken'];
  settings: PlacementSettings;
  /** what a ready build's retry backoff is compared with */
  clock: Clock;
  /** another pass soon: a substitution may have made builds ready (the queue learns which) */
  wake(): void;
  /** kiln_dispatch_latency_seconds */
  metrics?: Pick<KilnMetrics, 'jobDispatched'>;
  /** the stored phase samples (docs/metrics.md, "Stored metrics: job phases") */
  phases?: Pick<PhaseSampleBuffer, 'record'>;
  /** a private repository of the Git host application: where and with what token its evaluation fetches (null: as any repository) */
  privateFetch?: PrivateFetchLookup;
  log: Logger;
  /** a cluster job's build whose job was ended here (the attempt aborted): back to the queue */
  requeue(job: BuildJobEntry): Promise<void>;
}

/** services/gitHosts' repositoryAccess, injected: builds does not depend on gitHosts. */
export type PrivateFetchLookup = (projectId: string, repository: string) => Promise<{ repository: string; access: RepositoryAccess } | null>;

type Assignment = {
  worker: ConnectedWorker; build: ReadyBuild; caches: ProjectCache[]; predicted: number | null; cluster?: ClusterJobField;
  /** a cluster job's members, rank 0 first: all of them scope its outcome */
  members?: readonly ConnectedWorker[];
};

/**
 * The projects whose organizations a build's outcome stands for (tenantScope.ts): null when only
 * kiln's own workers took part; else those every scoped worker serves. A cluster build's members of
 * rank ≥ 1 compute and hand data to rank 0, so an outcome stands only for whom every member's word
 * stands for (placement makes them all serve the build's project, so the set is never empty).
 */
export function outcomeScope(workers: readonly Pick<ConnectedWorker, 'open' | 'projects'>[]): string[] | null {
  const scoped = workers.filter((w) => !w.open);
  if (scoped.length === 0) return null;
  return scoped.slice(1).reduce<string[]>((shared, w) => shared.filter((p) => w.projects.includes(p)), [...scoped[0]!.projects]);
}
type ClusterJobField = NonNullable<ReturnType<typeof buildJobMessage>['cluster']>;
/** What a pass has given each worker so far on top of what it runs: builds and their predicted bytes. */
type Planned = Map<ConnectedWorker, { builds: number; bytes: number }>;

export class BuildPlacement {
  private readonly refusedUntil = new Map<string, number>();
  /**
   * Builds placed whose start transaction has not ended yet, and what they hold on their workers:
   * a pass does not wait for its starts, so the next one places what was made ready meanwhile
   * instead of waiting a round of commits (issue 23), and counts these as running.
   */
  private readonly starting = new Set<string>();
  private readonly startingOn: Planned = new Map();
  private readonly startBatches = new Set<Promise<void>>();
  /** builds placed while a start transaction was under way: the next one starts them */
  private readonly placed: Assignment[] = [];
  /** a start transaction that failed: the next pass reports it */
  private startFailure: unknown = null;
  /**
   * Builds looked up in the caches once when they became ready, not on every pass while they wait
   * for a worker: by id, with their substitute misses then. A substitute miss sends the build back
   * counted (substitute_misses + 1), so it is looked up again, whichever pass reads it first (the
   * re-queue commits before its failure's handling has returned).
   */
  private readonly substitutionChecked = new Map<string, number>();
  /**
   * Each project's caches, read once between two full passes: a pass woken by the build cycle (a
   * freed slot, a completion) places with those read before, without a round trip of its own (issue
   * 23); every full pass (the periodic tick at least once a second, any other wake) reads them again.
   */
  private readonly projectCaches = new Map<string, ProjectCache[]>();
  /** recent finished peaks by derivation name: the builds' memory predictions (memoryReservations.ts) */
  readonly peaks = new PeakMemoryHistory();

  /** builds that need several workers at once */
  readonly cluster: ClusterPlacement;
  /** the builds workers declined: not offered to them again for a while, and no attempt spent (buildDeclines.ts) */
  readonly declines: BuildDeclines;

  constructor(private readonly deps: BuildPlacementDeps) {
    const { sql, jobs, clock, log, settings, workers } = deps;
    this.declines = new BuildDeclines(clock);
    this.cluster = new ClusterPlacement({
      sql, jobs, clock, log, settings, requeue: deps.requeue, wake: deps.wake,
      connected: (worker) => workers.connected().includes(worker),
      fits: (worker, build) => this.fits(worker, build, isPlacementFeature),
      serves,
      caches: async (project) => {
        const caches = await projectCaches(sql, project);
        return targetCaches(caches).length > 0 ? caches : null;
      },
      startBuild: async (worker, build, caches, cluster, members) => (await this.startBuilds([{ worker, build, caches, predicted: null, cluster, members }]))[0] ?? null,
      memberJob: (jobId, build, caches) => buildJobMessage(jobId, build, caches, { ...settings, readToken: deps.readToken }),
    });
  }

  /** The worker refused a job it had not taken (busy, or unable): it gets none for a moment. */
  refused(workerId: string): void {
    this.refusedUntil.set(workerId, this.deps.clock.now().getTime() + REFUSAL_PAUSE_MS);
  }

  /** A build job ended: its slot can take a ready build now, before its completion commits. */
  slotFreed(): void {
    if (this.deps.ready.size > 0) this.deps.wake();
  }

  private available(worker: ConnectedWorker): boolean {
    return (this.refusedUntil.get(worker.hello.workerId) ?? 0) <= this.deps.clock.now().getTime();
  }

  /** Architecture, system features (but those `ignored`) and project: the worker could build it. */
  private fits(worker: ConnectedWorker, build: ReadyBuild, ignored: (feature: string) => boolean = () => false): boolean {
    return (build.system === 'builtin' || worker.hello.architectures.includes(build.system))
      && build.required_features.every((f) => ignored(f) || worker.hello.systemFeatures.includes(f))
      && build.projects.some((p) => serves(worker, p));
  }

  async dispatchEvaluations(): Promise<void> {
    const { sql, events, workers, jobs, storage, settings } = this.deps;
    for (const waiting of await queuedEvaluations(sql, 'waiting')) {
      if ((await evaluationWaitReason(sql, storage, settings.maxStorageGb, waiting.project_id)) === null) {
        await changePhase(events, waiting.id, { event: { type: 'requeue', why: 'room' } });
      }
    }
    for (const evaluation of await queuedEvaluations(sql, 'queued')) {
      const reason = await evaluationWaitReason(sql, storage, settings.maxStorageGb, evaluation.project_id);
      if (reason !== null) {
        await changePhase(events, evaluation.id, { event: { type: 'wait' }, reason });
        continue;
      }
      const worker = workers.connected().find((w) =>
        w.hello.capabilities.eval && serves(w, evaluation.project_id) && this.available(w) && !this.cluster.holds(w) && jobs.running(w, 'eval') < w.hello.maxConcurrentEvals);
      if (!worker) continue;
      let fetchWith: Awaited<ReturnType<PrivateFetchLookup>> = null;
      let source: { url: string; sha256: string } | null = null;
      if (evaluation.source_sha256 !== null) {
        // an uploaded tree: the worker fetches it with a token of this dispatch (services/builds/sourceUploads.ts)
        source = evaluation.source_upload_id === null ? null : await jobSourceUrl(sql, settings.serveUrl, evaluation.source_upload_id);
        if (source === null) {
          await changePhase(events, evaluation.id, { event: { type: 'reject' }, reason: 'fetch_failed: the uploaded source is gone (uploads are kept for a day); run kiln build again' });
          continue;
        }
        // the capability's hash is written with the phase: the job is never sent without it
        const inputCache = mintInputCache(settings.serveUrl, evaluation.id);
        if (!(await changePhase(events, evaluation.id, { event: { type: 'dispatch' }, workerId: worker.hello.workerId, inputCacheTokenHash: inputCache.tokenHash }))) continue;
        this.sendEvaluation(worker, evaluation, null, inputCache.access, source);
        continue;
      }
      try {
        fetchWith = (await this.deps.privateFetch?.(evaluation.project_id, evaluation.repository)) ?? null;
      } catch (error) {
        // the host could not be asked, or its clone address is refused: failed with why (POST /evals/{id} restart tries again)
        const why = error instanceof Error ? error.message : String(error);
        await changePhase(events, evaluation.id, { event: { type: 'reject' }, reason: `fetch_failed: the Git host application gave no access to the repository: ${why}`.slice(0, 2000) });
        continue;
      }
      const inputCache = mintInputCache(settings.serveUrl, evaluation.id);
      if (!(await changePhase(events, evaluation.id, { event: { type: 'dispatch' }, workerId: worker.hello.workerId, inputCacheTokenHash: inputCache.tokenHash }))) continue;
      this.sendEvaluation(worker, evaluation, fetchWith, inputCache.access);
    }
  }

  private sendEvaluation(
    worker: ConnectedWorker, evaluation: QueuedEvaluation, fetchWith: Awaited<ReturnType<PrivateFetchLookup>>,
    inputCache: { url: string; token: string }, source: { url: string; sha256: string } | null = null,
  ): void {
    const attempt = evaluation.attempts + 1;
    const jobId = `eval:${evaluation.id}:${attempt}`;
    this.deps.jobs.add({ kind: 'eval', jobId, workerId: worker.hello.workerId, evaluationId: evaluation.id, attempt, queuedAt: evaluation.queued_at }, worker);
    worker.link.send({
      t: 'evalJob', jobId, project: evaluation.project_id, repository: fetchWith?.repository ?? evaluation.repository, commit: evaluation.commit,
      attributes: evaluation.wildcard, timeoutSecs: 0, ...(fetchWith ? { access: fetchWith.access } : {}), ...(source ? { source } : {}),
      inputCache,
    });
    this.deps.events.publish('worker.job_dispatched', { worker: worker.hello.workerId, job_id: evaluation.id, kind: 'evaluation', evaluation_id: evaluation.id });
  }

  /** Resolves once the start transactions under way have ended and their jobs were sent. */
  async settle(): Promise<void> {
    while (this.startBatches.size > 0) await Promise.all(this.startBatches);
  }

  /** `fresh`: a full pass, which reads the projects' caches again (see projectCaches). */
  async dispatchBuilds(fresh = true): Promise<void> {
    const { sql, workers, outcomes, settings, ready } = this.deps;
    if (fresh) this.projectCaches.clear();
    if (this.startFailure !== null) {
      const failure = this.startFailure;
      this.startFailure = null;
      throw failure;
    }
    const buildWorkers = workers.connected().filter((w) => w.hello.capabilities.build && this.available(w));
    if (buildWorkers.length === 0 && !this.cluster.active) return;
    const caches = this.projectCaches;
    const cachesOf = async (projectId: string) => {
      let found = caches.get(projectId);
      if (!found) caches.set(projectId, (found = await projectCaches(sql, projectId)));
      return found;
    };
    const builds = (await ready.take()).filter((b) => !this.starting.has(b.id));
    // Each build is looked up in the caches once, when it became ready, not on every pass while it
    // waits for a worker; the pass asks for all of them in one query. Past
    // build.substituteMissEscalationThreshold misses, the cache's claim is no longer believed.
    const questions: OutputsQuestion<string>[] = [];
    for (const build of builds) {
      if (this.substitutionChecked.get(build.id) === build.substitute_misses || build.substitute_misses >= settings.substituteMissEscalationThreshold) continue;
      this.substitutionChecked.set(build.id, build.substitute_misses);
      const outputs = Object.values(build.outputs).filter((p): p is string => p !== null);
      for (const project of build.projects) questions.push({ key: build.id, outputs, caches: readable(await cachesOf(project)) });
    }
    if (this.substitutionChecked.size > 200_000) this.substitutionChecked.clear();
    const substitutable = await outputsCached(sql, questions);
    if (substitutable.size > 0) {
      const substituted = await outcomes.substituteAll([...substitutable]);
      for (const id of substitutable) ready.remove(id);
      await outcomes.finishEvaluations({ derivationBuilds: substituted });
      this.deps.wake();
    }
    await this.cluster.place(builds.filter((b) => !substitutable.has(b.id) && clusterSize(b.required_features) !== null), buildWorkers);
    const candidates = buildWorkers.filter((w) => !this.cluster.holds(w));
    const assignments: Assignment[] = [];
    const planned: Planned = new Map([...this.startingOn].map(([w, plan]) => [w, { ...plan }]));
    await this.peaks.warm(sql);
    const reserved = reservedMemory(this.deps.jobs);
    // Free slots left among the candidates: none, and no other build can be placed. A pass woken by
    // one freed slot stops after one build instead of asking every worker about every ready build.
    let free = candidates.reduce((n, w) => n + Math.max(0, w.hello.maxConcurrentBuilds - this.deps.jobs.running(w, 'build') - (planned.get(w)?.builds ?? 0)), 0);
    for (const build of builds) {
      if (free <= 0) break;
      if (substitutable.has(build.id) || clusterSize(build.required_features) !== null) continue;
      const predicted = this.peaks.predicted(build.name);
      const worker = this.pickWorker(candidates, build, predicted, planned, reserved);
      if (!worker) continue;
      const caches = await cachesOf(build.projects.find((p) => serves(worker, p))!);
      if (targetCaches(caches).length === 0) continue;
      const plan = planned.get(worker) ?? { builds: 0, bytes: 0 };
      planned.set(worker, { builds: plan.builds + 1, bytes: plan.bytes + (predicted ?? 0) });
      assignments.push({ worker, build, caches, predicted });
      free -= 1;
    }
    if (assignments.length > 0) this.startInBackground(assignments);
    // every build of the window was tried and slots are left: the rest cannot go anywhere now (readyQueue.ts)
    if (free > 0) ready.pagePast();
  }

  /**
   * Starts the pass's builds while the next pass runs; until then they count on their workers. One
   * start transaction at a time: builds placed while one is under way go in the next, so passes woken
   * build by build (a freed slot each) still start their builds in batches, not a transaction each.
   */
  private startInBackground(assignments: readonly Assignment[]): void {
    this.hold(assignments, 1);
    for (const { build } of assignments) this.deps.ready.remove(build.id);
    this.placed.push(...assignments);
    if (this.startBatches.size === 0) this.startPlaced();
  }

  private startPlaced(): void {
    const assignments = this.placed.splice(0);
    if (assignments.length === 0) return;
    const batch: Promise<void> = this.startBuilds(assignments)
      .then(() => undefined)
      .catch((error: unknown) => {
        // nothing was started: the builds are read from the database again at the next pass
        this.startFailure = error;
        this.deps.ready.invalidate();
        this.deps.wake();
      })
      .finally(() => {
        this.hold(assignments, -1);
        this.startBatches.delete(batch);
        this.startPlaced();
      });
    this.startBatches.add(batch);
  }

  /** Placed builds not started yet count on their workers (+1) until their start transaction ended (-1). */
  private hold(assignments: readonly Assignment[], sign: 1 | -1): void {
    for (const { worker, build, predicted } of assignments) {
      if (sign > 0) this.starting.add(build.id);
      else this.starting.delete(build.id);
      const plan = this.startingOn.get(worker) ?? { builds: 0, bytes: 0 };
      const next = { builds: plan.builds + sign, bytes: plan.bytes + sign * (predicted ?? 0) };
      if (next.builds > 0) this.startingOn.set(worker, next);
      else this.startingOn.delete(worker);
    }
  }

  private pickWorker(candidates: ConnectedWorker[], build: ReadyBuild, predicted: number | null, planned: Planned, reserved: ReadonlyMap<string, number>): ConnectedWorker | undefined {
    const busy = (w: ConnectedWorker) => this.deps.jobs.running(w, 'build') + (planned.get(w)?.builds ?? 0);
    const reservedOn = (w: ConnectedWorker) => (reserved.get(w.hello.workerId) ?? 0) + (planned.get(w)?.bytes ?? 0);
    const paused = this.declines.pausedFor(build.id);
    const fits = candidates.filter((w) =>
      this.fits(w, build)
      && (paused === null || !paused(w.hello.workerId))
      && busy(w) < w.hello.maxConcurrentBuilds
      && memoryFits(w, reservedOn(w), busy(w), predicted));
    return bestWorker(this.deps.settings.scoringPolicy, fits, { preferLocalBuild: build.prefer_local_build }, busy);
  }

  /** Starts a pass's builds in one transaction (one commit, not one per build), then sends the jobs: their ids (null: not started). */
  private async startBuilds(assignments: readonly Assignment[]): Promise<(string | null)[]> {
    const { events, jobs, outcomes, settings, readToken } = this.deps;
    // what the worker builds stands for the organizations of the projects it serves, unless it is kiln's own (tenantScope.ts)
    const attempts = await outcomes.startAll(assignments.map(({ worker, build, members }) => ({ id: build.id, workerId: worker.hello.workerId, projects: outcomeScope(members ?? [worker]) })));
    return assignments.map(({ worker, build, caches, predicted, cluster }, i) => {
      // null: no longer queued (another process won it, or it was aborted)
      this.deps.ready.remove(build.id);
      const attempt = attempts[i];
      if (attempt === null || attempt === undefined) return null;
      const jobId = `build:${build.id}:${attempt}`;
      jobs.add({ kind: 'build', jobId, workerId: worker.hello.workerId, derivationBuildId: build.id, attempt, targetCaches: new Set(targetCaches(caches)),
        memory: { name: build.name, predicted } }, worker);
      worker.link.send({ ...buildJobMessage(jobId, build, caches, { ...settings, readToken }), ...(cluster ? { cluster } : {}) });
      events.publish('worker.job_dispatched', { worker: worker.hello.workerId, job_id: build.id, kind: 'build', build_id: build.id });
      const waited = Math.max(0, (this.deps.clock.now().getTime() - build.queued_at.getTime()) / 1000);
      this.deps.metrics?.jobDispatched('build', waited);
      this.deps.phases?.record('build', 'dispatch', waited);
      return jobId;
    });
  }
}
