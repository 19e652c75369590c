// Job phase timings held in memory between two flushes to PostgreSQL (phase_samples, written by
// services/metrics/phaseRecorder.ts every metrics.cacheFlushIntervalSecs): the scheduler records a
// sample when a job phase ends, nothing more. Samples of the same kind, phase and second are summed
// at once into one row (count, total, longest: all the rollups take from them), so a burst of
// dispatches costs a few rows per second, not two per build (issue 23). Kept whether or not
// /metrics is enabled: the stored series are for people. Bounded: past MAX_PENDING unflushed rows
// (a database away for long) newer samples are dropped and counted, so memory stays bounded.
import type { PhaseKind, PhaseName, PhaseSample } from '../db/phaseSamples.js';

const MAX_PENDING = 100_000;

export class PhaseSampleBuffer {
  /** by kind, phase and second: the samples' row */
  private pending = new Map<string, PhaseSample>();
  private droppedSamples = 0;

  constructor(private readonly now: () => Date) {}

  record(kind: PhaseKind, phase: PhaseName, seconds: number): void {
    if (!Number.isFinite(seconds)) return;
    const ms = Math.max(0, seconds * 1000);
    const second = Math.floor(this.now().getTime() / 1000) * 1000;
    this.add({ kind, phase, endedAt: new Date(second), durationMs: ms, samples: 1, maxMs: ms });
  }

  /** The samples since the last take, a row per kind, phase and second. */
  take(): PhaseSample[] {
    const rows = [...this.pending.values()];
    this.pending = new Map();
    return rows;
  }

  /** A flush failed: its rows go back, summed with those recorded since (within the bound). */
  restore(samples: readonly PhaseSample[]): void {
    for (const sample of samples) this.add(sample);
  }

  /** samples dropped since the start because too many waited for a flush */
  get dropped(): number {
    return this.droppedSamples;
  }

  private add(sample: PhaseSample): void {
    const key = `${sample.kind} ${sample.phase} ${sample.endedAt.getTime()}`;
    const row = this.pending.get(key);
    const count = sample.samples ?? 1;
    const max = sample.maxMs ?? sample.durationMs;
    if (row) {
      row.samples = (row.samples ?? 1) + count;
      row.durationMs += sample.durationMs;
      row.maxMs = Math.max(row.maxMs ?? row.durationMs, max);
    } else if (this.pending.size >= MAX_PENDING) {
      this.droppedSamples += count;
    } else {
      this.pending.set(key, { ...sample, samples: count, maxMs: max });
    }
  }
}
