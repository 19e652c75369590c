// Job phase timings held in memory between two flushes to PostgreSQL (phase_samples, written by
// services/metrics/phaseRecorder.ts every metrics.cacheFlushIntervalSecs): the scheduler pushes a
// sample when a job phase ends, nothing more. Kept whether or not /metrics is enabled: the stored
// series are for people. Bounded: past MAX_PENDING unflushed samples (a database away for long)
// newer ones are dropped and counted, so memory stays bounded.
import type { PhaseKind, PhaseName, PhaseSample } from '../db/phaseSamples.js';

const MAX_PENDING = 100_000;

export class PhaseSampleBuffer {
  private pending: PhaseSample[] = [];
  private droppedSamples = 0;

  constructor(private readonly now: () => Date) {}

  record(kind: PhaseKind, phase: PhaseName, seconds: number): void {
    if (!Number.isFinite(seconds)) return;
    if (this.pending.length >= MAX_PENDING) {
      this.droppedSamples++;
      return;
    }
    this.pending.push({ kind, phase, endedAt: this.now(), durationMs: Math.max(0, seconds * 1000) });
  }

  /** The samples since the last take. */
  take(): PhaseSample[] {
    return this.pending.splice(0);
  }

  /** A flush failed: its samples go back in front, for the next (within the bound). */
  restore(samples: readonly PhaseSample[]): void {
    const room = Math.max(0, MAX_PENDING - this.pending.length);
    this.droppedSamples += Math.max(0, samples.length - room);
    this.pending = [...samples.slice(0, room), ...this.pending];
  }

  /** samples dropped since the start because too many waited for a flush */
  get dropped(): number {
    return this.droppedSamples;
  }
}
