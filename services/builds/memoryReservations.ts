// Build memory reservations (worker.build.cgroup; docs/builds.md, "Memory reservations"): a build's
// predicted peak is the largest peak memory of the last finished builds of the same derivation
// name; a running build reserves the larger of its prediction and the peak its worker last reported
// in a heartbeat; a worker takes another build only while its memory less its reservations covers
// that build's prediction, or when it runs nothing (no build waits forever for room).
import type { Sql } from 'postgres';
import type { ConnectedWorker } from '../workers/index.js';
import type { BuildJobEntry, JobTable } from './schedulerJobs.js';

/** Finished peaks kept per derivation name: a rare large one is still seen, an old one goes. */
const PEAKS_PER_NAME = 5;
/** Names remembered; the ones learned longest ago go first. */
const MAX_NAMES = 50_000;
/** Finished samples read when the history starts (the newest), by the recorded_at index. */
const WARM_SAMPLES = 20_000;

/**
 * The recent finished peaks by derivation name, learned from this process's build results and,
 * once at start, from the newest stored samples: one map lookup per placed build, no query per pass.
 */
export class PeakMemoryHistory {
  private readonly peaks = new Map<string, number[]>();
  private warmed: Promise<void> | null = null;

  /** Reads the newest stored finished samples once (later calls wait for the same read). */
  warm(sql: Sql): Promise<void> {
    this.warmed ??= (async () => {
      const rows = await sql<{ name: string; peak: string }[]>`
        select d.name, s.peak_memory_bytes as peak
        from (select derivation_build_id, peak_memory_bytes, recorded_at from build_resource_samples
              where not running and peak_memory_bytes is not null order by recorded_at desc limit ${WARM_SAMPLES}) s
        join derivation_builds db on db.id = s.derivation_build_id join derivations d on d.id = db.derivation_id
        order by s.recorded_at`;
      for (const row of rows) this.learn(row.name, Number(row.peak));
    })().catch((error: unknown) => {
      this.warmed = null; // the next pass reads again
      throw error;
    });
    return this.warmed;
  }

  /** A finished build of this name peaked at `peakBytes`. */
  learn(name: string, peakBytes: number): void {
    const kept = this.peaks.get(name) ?? [];
    this.peaks.delete(name);
    kept.push(peakBytes);
    if (kept.length > PEAKS_PER_NAME) kept.shift();
    this.peaks.set(name, kept);
    if (this.peaks.size > MAX_NAMES) this.peaks.delete(this.peaks.keys().next().value!);
  }

  /** The largest recent peak of builds of this name; null when none was measured. */
  predicted(name: string): number | null {
    const kept = this.peaks.get(name);
    return kept ? Math.max(...kept) : null;
  }
}

/** What a running build holds: the larger of its prediction and its reported peak (0 when neither is known). */
const reservation = (job: Pick<BuildJobEntry, 'memory'>) => Math.max(job.memory.predicted ?? 0, job.memory.reported ?? 0);

/** Each worker's reserved bytes, summed once per placement pass over this process's running builds. */
export function reservedMemory(jobs: JobTable): Map<string, number> {
  const reserved = new Map<string, number>();
  for (const job of jobs.all()) if (job.kind === 'build') reserved.set(job.workerId, (reserved.get(job.workerId) ?? 0) + reservation(job));
  return reserved;
}

/** Whether the worker has room for a build predicted to peak at `predicted`: always when it runs nothing. */
export const memoryFits = (worker: ConnectedWorker, reservedBytes: number, running: number, predicted: number | null) =>
  running === 0 || worker.hello.memoryBytes - reservedBytes >= (predicted ?? 0);
