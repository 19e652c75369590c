// Cache traffic counted in memory per cache and minute, between two flushes to PostgreSQL
// (metrics.cacheFlushIntervalSecs, services/metrics/trafficRecorder.ts). The serving path adds to a
// map entry; nothing else happens per request. Counted whether or not /metrics is enabled: the
// stored series are for people and the UI.
import type { TrafficMinute } from '../db/cacheTraffic.js';

export class TrafficCounters {
  private pending = new Map<string, TrafficMinute>();

  constructor(private readonly now: () => number = Date.now) {}

  private entry(cacheId: string): TrafficMinute {
    const minute = Math.floor(this.now() / 60_000) * 60_000;
    const key = `${cacheId} ${minute}`;
    let entry = this.pending.get(key);
    if (entry === undefined) {
      entry = { cacheId, minute: new Date(minute), narinfoHits: 0, narinfoMisses: 0, upstreamHits: 0, narBytesServed: 0 };
      this.pending.set(key, entry);
    }
    return entry;
  }

  narinfo(cacheId: string, outcome: 'hit' | 'miss' | 'upstream'): void {
    const entry = this.entry(cacheId);
    if (outcome === 'hit') entry.narinfoHits++;
    else if (outcome === 'miss') entry.narinfoMisses++;
    else entry.upstreamHits++;
  }

  served(cacheId: string, bytes: number): void {
    this.entry(cacheId).narBytesServed += bytes;
  }

  /** Everything counted since the last take, emptied. */
  take(): TrafficMinute[] {
    const taken = [...this.pending.values()];
    this.pending = new Map();
    return taken;
  }

  /** Puts back rows a failed flush could not write, to be tried again with the next. */
  restore(rows: readonly TrafficMinute[]): void {
    for (const row of rows) {
      const key = `${row.cacheId} ${row.minute.getTime()}`;
      const entry = this.pending.get(key);
      if (entry === undefined) this.pending.set(key, { ...row });
      else {
        entry.narinfoHits += row.narinfoHits;
        entry.narinfoMisses += row.narinfoMisses;
        entry.upstreamHits += row.upstreamHits;
        entry.narBytesServed += row.narBytesServed;
      }
    }
  }
}
