// The flush behind the stored job phase timings (docs/metrics.md, "Stored metrics: job phases"),
// run by the upkeep every metrics.cacheFlushIntervalSecs: this process's buffered phase samples
// into phase_samples. Their rollups and retention run with the cache traffic's (trafficRecorder.ts).
import { addPhaseSamples, type PhaseSampleBuffer, type Sql } from '../../storage/index.js';

/** Writes the samples buffered since the last flush (a row per kind, phase and second); a failed write keeps them for the next. */
export async function flushPhases(sql: Sql, buffer: Pick<PhaseSampleBuffer, 'take' | 'restore'>): Promise<{ samples: number }> {
  const samples = buffer.take();
  try {
    await addPhaseSamples(sql, samples);
  } catch (err) {
    buffer.restore(samples);
    throw err;
  }
  return { samples: samples.reduce((n, s) => n + (s.samples ?? 1), 0) };
}
