// The periodic upkeep of a server process (issue 20, items 7, 9 and 10; docs/gc.md, "The other
// background sweeps"): the NAR signature backfill (cache.signSweepIntervalSecs, woken at once by a
// key rotation in any process), the debug build-ID index backfill (cache.debugIndexIntervalSecs),
// the build graph consistency check (metrics.graphConsistencyIntervalSecs; 0 disables it) and
// record retention (retentionDays: expired sessions, worker connection history, per-build resource samples, the Git host's
// delivery ids and finished collection runs; webhook deliveries have their own in the delivery engine) and the
// shared evaluation cache's eviction (eval.cache.sweepIntervalSecs, docs/eval-cache.md). Each is a coalescing loop on a timer, shown under the
// supervision tree. Every pass is safe in several processes at once (slices of idempotent writes),
// so no process needs to lead. The intervals are measured on the injected clock (a short real tick
// compares it with each loop's due time), so a test's stepped clock drives the timers.
import type { Config, Logger } from '../../config/index.js';
import { CoalescingLoop, type Clock, type Supervisor } from '../../supervisors/index.js';
import type { BlobStore, EventBus, NarStorage, Sql } from '../../storage/index.js';
import { cacheSigningKeys, KEY_ROTATED_REASONS, onCacheChanged, runDebugIndexBackfill, runSignSweep, type DebugIndexReport, type SignSweepReport } from '../caches/index.js';
import { deleteOldBuildSamples, deleteOldClusterJobs, runGraphConsistencyCheck, sweepEvalInputs, type EvalInputSweepReport, type GraphConsistencyReport } from '../builds/index.js';
import { deleteExpiredSessions } from '../accounts/index.js';
import { deleteOldWorkerConnections, type WorkerConnections } from '../workers/index.js';
import { deleteOldHookDeliveries } from '../gitHosts/index.js';
import { deleteOldCollectionRuns } from '../gc/index.js';
import type { PhaseSampleBuffer, SecretBox, TrafficCounters } from '../../storage/index.js';
import { flushPhases, flushTraffic, rollUpAndPrune, sampleInstance, sampleWorkers } from '../metrics/index.js';

/** Retention runs hourly: retentionDays counts days, an hour late is within its precision. */
const RETENTION_INTERVAL_MS = 3_600_000;
/** How often the timers compare the clock with their due times: the precision of every interval. */
const TICK_MS = 250;

export interface RetentionReport {
  sessions: number;
  workerConnections: number;
  gitHostDeliveries: number;
  buildSamples: number;
  /** finished cluster job attempts (cluster_jobs); active ones stay */
  clusterJobs: number;
  /** finished passes and deep rounds (gc_runs) */
  gcRuns: number;
}

export interface UpkeepDeps {
  config: Pick<Config, 'cache.signSweepIntervalSecs' | 'cache.debugIndexIntervalSecs' | 'metrics.graphConsistencyIntervalSecs' | 'retentionDays'
    | 'metrics.cacheFlushIntervalSecs' | 'metrics.rollupIntervalSecs' | 'metrics.retention.rawDays' | 'metrics.retention.rollupDays'
    | 'metrics.workerSampleIntervalSecs' | 'metrics.instanceIntervalSecs' | 'eval.cache.maxAgeDays' | 'eval.cache.maxTotalBytes' | 'eval.cache.sweepIntervalSecs'>;
  log: Logger;
  clock: Clock;
  /** the binary cache's pool: signatures and the debug index */
  cacheSql: Sql;
  /** the scheduler's pool: the build graph, sessions and worker connections */
  sql: Sql;
  secretBox: SecretBox;
  nars: Pick<NarStorage, 'reads'>;
  /** the blob store the shared evaluation cache's NARs are in (eval-inputs/…) */
  blobs: Pick<BlobStore, 'delete' | 'list'>;
  bus: Pick<EventBus, 'subscribe'>;
  supervisor: Supervisor;
  /** this process's cache traffic counts, flushed every metrics.cacheFlushIntervalSecs */
  trafficCounters: Pick<TrafficCounters, 'beforeTaking' | 'take' | 'restore' | 'takeFiles' | 'restoreFiles'>;
  /** this process's job phase samples, flushed with the traffic (metrics.cacheFlushIntervalSecs); none: nothing to flush */
  phaseSamples?: Pick<PhaseSampleBuffer, 'take' | 'restore'>;
  /** the workers connected to this process, sampled every metrics.workerSampleIntervalSecs; none: no samples */
  workers?: Pick<WorkerConnections, 'connected'>;
  /** false: no loop wakes by its interval, only by hand or by event (tests that step the clock) */
  timers?: boolean;
}

/** The passes, for tests and operators' tools: each runs once now and resolves with what it did. */
export interface Upkeep {
  signSweep(): Promise<SignSweepReport>;
  debugIndex(): Promise<DebugIndexReport>;
  /** null when metrics.graphConsistencyIntervalSecs is 0 */
  graphConsistency(): Promise<GraphConsistencyReport | null>;
  retention(): Promise<RetentionReport>;
  /** writes the cache traffic counted since the last flush */
  trafficFlush(): Promise<{ minutes: number }>;
  /** writes the job phase samples taken since the last flush */
  phaseFlush(): Promise<{ samples: number }>;
  /** rolls the stored traffic up and applies metrics.retention.* */
  metricRollup(): Promise<{ deleted: number }>;
  /** writes a sample of each connected worker and deletes samples past metrics.retention.rawDays */
  workerSamples(): Promise<{ sampled: number; deleted: number }>;
  /** writes the instance window's row of this interval (unless another process did) and deletes rows past metrics.retention.rawDays */
  instanceSample(): Promise<{ sampled: number; deleted: number }>;
  /** evicts shared evaluation-cache blobs: unused for eval.cache.maxAgeDays, then least recently used past eval.cache.maxTotalBytes */
  evalInputSweep(): Promise<EvalInputSweepReport>;
  /** Resolves once the passes the timers and wakes started have ended. */
  settle(): Promise<void>;
  stop(): Promise<void>;
}

export function startUpkeep(deps: UpkeepDeps): Upkeep {
  const { config, log, clock, cacheSql, sql } = deps;
  const keys = cacheSigningKeys(cacheSql, deps.secretBox);
  const graphIntervalSecs = config['metrics.graphConsistencyIntervalSecs'];

  const passes = {
    signSweep: () => runSignSweep({ sql: cacheSql, keys, reads: deps.nars.reads }, clock.now()),
    debugIndex: () => runDebugIndexBackfill(cacheSql),
    graphConsistency: async () => (graphIntervalSecs === 0 ? null : runGraphConsistencyCheck(sql)),
    retention: async (): Promise<RetentionReport> => ({
      sessions: await deleteExpiredSessions(sql, config['retentionDays'], clock.now()),
      workerConnections: await deleteOldWorkerConnections(sql, config['retentionDays'], clock.now()),
      gitHostDeliveries: await deleteOldHookDeliveries(sql, config['retentionDays'], clock.now()),
      buildSamples: await deleteOldBuildSamples(sql, config['retentionDays'], clock.now()),
      clusterJobs: await deleteOldClusterJobs(sql, config['retentionDays'], clock.now()),
      gcRuns: await deleteOldCollectionRuns(sql, config['retentionDays'], clock.now()),
    }),
    trafficFlush: () => flushTraffic(cacheSql, deps.trafficCounters),
    phaseFlush: async () => (deps.phaseSamples ? flushPhases(cacheSql, deps.phaseSamples) : { samples: 0 }),
    metricRollup: () => rollUpAndPrune(cacheSql, config, clock.now()),
    workerSamples: async () => (deps.workers ? sampleWorkers(sql, deps.workers, config['metrics.retention.rawDays'], clock.now()) : { sampled: 0, deleted: 0 }),
    evalInputSweep: () => sweepEvalInputs(sql, deps.blobs, { maxAgeDays: config['eval.cache.maxAgeDays'], maxTotalBytes: config['eval.cache.maxTotalBytes'] }, clock.now()),
    instanceSample: () => sampleInstance(sql, config['metrics.instanceIntervalSecs'], config['metrics.retention.rawDays'], clock.now()),
  };

  const loops: CoalescingLoop[] = [];
  const timers: { loop: CoalescingLoop; intervalMs: number; dueAt: number }[] = [];
  // One tick for every loop: a loop is due an interval after it was last woken by its timer.
  const ticker = deps.timers === false ? null : setInterval(() => {
    const now = clock.now().getTime();
    for (const timer of timers) {
      if (now < timer.dueAt) continue;
      timer.dueAt = now + timer.intervalMs;
      timer.loop.wake();
    }
  }, TICK_MS);
  ticker?.unref();
  const loopOf = (id: string, intervalMs: number, pass: () => Promise<object | null>): CoalescingLoop => {
    const loop = new CoalescingLoop(async () => {
      const report = await pass();
      if (report !== null && Object.values(report).some((n) => n !== 0)) log.info({ upkeep: id, ...report }, `${id} pass done`);
    }, (err) => log.error({ err, upkeep: id }, `the ${id} pass failed; it runs again at the next interval`));
    loops.push(loop);
    deps.supervisor.watch({ id, kind: 'upkeep-loop', inspect: () => loop.inspect() });
    timers.push({ loop, intervalMs, dueAt: clock.now().getTime() + intervalMs });
    return loop;
  };

  const signLoop = loopOf('sign-sweep', config['cache.signSweepIntervalSecs'] * 1000, passes.signSweep);
  loopOf('debug-index', config['cache.debugIndexIntervalSecs'] * 1000, passes.debugIndex);
  if (graphIntervalSecs > 0) loopOf('graph-consistency', graphIntervalSecs * 1000, passes.graphConsistency);
  if (config['retentionDays'] > 0) loopOf('record-retention', RETENTION_INTERVAL_MS, passes.retention);
  const flushLoop = loopOf('traffic-flush', config['metrics.cacheFlushIntervalSecs'] * 1000, async () => ((await passes.trafficFlush()).minutes === 0 ? null : {}));
  // Quiet, like the traffic's: a flush every few seconds is routine.
  const phaseLoop = loopOf('phase-flush', config['metrics.cacheFlushIntervalSecs'] * 1000, async () => (await passes.phaseFlush(), null));
  loopOf('metric-rollup', config['metrics.rollupIntervalSecs'] * 1000, passes.metricRollup);
  // Quiet: a sample every few seconds is routine, not news for the log.
  if (deps.workers) loopOf('worker-samples', config['metrics.workerSampleIntervalSecs'] * 1000, async () => (await passes.workerSamples(), null));
  loopOf('eval-input-sweep', config['eval.cache.sweepIntervalSecs'] * 1000, passes.evalInputSweep);
  loopOf('instance-window', config['metrics.instanceIntervalSecs'] * 1000, async () => (await passes.instanceSample(), null));
  // A rotation in any process: re-sign now rather than at the next interval.
  const unsubscribe = onCacheChanged(deps.bus, KEY_ROTATED_REASONS, () => signLoop.wake());

  return {
    ...passes,
    settle: async () => {
      await Promise.all(loops.map((l) => l.settle()));
    },
    async stop() {
      unsubscribe();
      if (ticker) clearInterval(ticker);
      // The last counts of this process are written before it goes.
      flushLoop.wake();
      phaseLoop.wake();
      await Promise.all([flushLoop.settle(), phaseLoop.settle()]);
      await Promise.all(loops.map((l) => l.stop()));
    },
  };
}
