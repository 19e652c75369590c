// Which of the workers that fit a build gets it (scheduler.scoringPolicy, docs/builds.md).
// simple: the least busy worker by its own build slots. resource-aware adds what the heartbeats
// report (free memory, load per core, free store space), the worker's CPU speed, and the
// derivation's preferLocalBuild, which favours the server's own local worker. Pure: the scheduler
// passes the running-job counts it keeps.
import type { ConnectedWorker } from './workerConnections.js';

export type ScoringPolicy = 'simple' | 'resource-aware';

export interface RankedBuild {
  preferLocalBuild: boolean;
}

/** Builds below this much free memory or store space are placed elsewhere when possible. */
const LOW_MEMORY_BYTES = 512 * 1024 * 1024;
const LOW_STORE_BYTES = 2 * 1024 * 1024 * 1024;

/** 0 (idle) … 1 (every build slot taken). */
const saturation = (worker: ConnectedWorker, running: number) => running / Math.max(1, worker.hello.maxConcurrentBuilds);

/** Lower is better. */
function resourceScore(worker: ConnectedWorker, running: number, build: RankedBuild): number {
  let score = saturation(worker, running);
  const load = worker.load;
  if (load) {
    score += Math.min(2, load.load1 / Math.max(1, worker.hello.cpuCores)) / 2;
    if (load.memoryFreeBytes < LOW_MEMORY_BYTES) score += 1;
    if (load.storeFreeBytes !== null && load.storeFreeBytes < LOW_STORE_BYTES) score += 1;
  }
  // A faster core shortens the build: up to a quarter of a slot's worth for the fastest worker seen.
  if (worker.hello.cpuCoreScore !== null) score -= Math.min(0.25, worker.hello.cpuCoreScore / 40_000);
  if (build.preferLocalBuild && worker.open) score -= 10;
  return score;
}

type Scored = { worker: ConnectedWorker; score: number };

function scorer(policy: ScoringPolicy, build: RankedBuild, running: (worker: ConnectedWorker) => number): (w: ConnectedWorker) => number {
  return policy === 'simple'
    ? (w) => saturation(w, running(w))
    : (w) => resourceScore(w, running(w), build);
}

// ties go to the worker connected first, so placement is stable
const better = (a: Scored, b: Scored) => a.score - b.score || a.worker.connectedAt.getTime() - b.worker.connectedAt.getTime();

/**
 * The best of the fitting workers, in one scan without a sort (placement asks once per build, among
 * up to thousands of workers). `running(worker)` is the number of builds it runs now.
 */
export function bestWorker(
  policy: ScoringPolicy,
  fits: readonly ConnectedWorker[],
  build: RankedBuild,
  running: (worker: ConnectedWorker) => number,
): ConnectedWorker | undefined {
  const score = scorer(policy, build, running);
  let best: Scored | undefined;
  for (const worker of fits) {
    const scored = { worker, score: score(worker) };
    if (best === undefined || better(scored, best) < 0) best = scored;
  }
  return best?.worker;
}
