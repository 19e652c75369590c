// Cache traffic counted in memory per cache and minute, between two flushes to PostgreSQL
// (metrics.cacheFlushIntervalSecs, services/metrics/trafficRecorder.ts). The serving path adds to a
// map entry; nothing else happens per request. Counted whether or not /metrics is enabled: the
// stored series are for people and the UI.
import type { TrafficMinute } from '../db/cacheTraffic.js';
import type { PathFetchCount } from '../db/pathFetches.js';
import { CatchUps } from './catchUps.js';

/**
 * Distinct NAR files counted per flush at most: past that, a flood of distinct files (a client
 * walking a whole cache) still counts in the minute totals, not per file, so memory stays bounded.
 */
const MAX_FILES_PER_FLUSH = 10_000;

export class TrafficCounters {
  private pending = new Map<string, TrafficMinute>();
  private files = new Map<string, PathFetchCount>();
  /** run before a flush takes the counts: the serving threads' counts not yet reported */
  readonly beforeTaking = new CatchUps();

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

  narinfo(cacheId: string, outcome: 'hit' | 'miss' | 'upstream', count = 1): void {
    const entry = this.entry(cacheId);
    if (outcome === 'hit') entry.narinfoHits += count;
    else if (outcome === 'miss') entry.narinfoMisses += count;
    else entry.upstreamHits += count;
  }

  /** A NAR file sent `fetches` times (a serving thread reports them counted), carrying `bytes` together: the bytes to the minute, the fetches to `fileHash` (the board's top fetched paths). */
  served(cacheId: string, bytes: number, fileHash?: string, fetches = 1): void {
    this.entry(cacheId).narBytesServed += bytes;
    if (fileHash === undefined) return;
    const day = Math.floor(this.now() / 86_400_000) * 86_400_000;
    this.addFile({ cacheId, day: new Date(day), fileHash, fetches, bytes });
  }

  /** Adds to a file's count, or starts one while there is room (MAX_FILES_PER_FLUSH). */
  private addFile(row: PathFetchCount): void {
    const key = `${row.cacheId} ${row.day.getTime()} ${row.fileHash}`;
    const file = this.files.get(key);
    if (file !== undefined) {
      file.fetches += row.fetches;
      file.bytes += row.bytes;
    } else if (this.files.size < MAX_FILES_PER_FLUSH) this.files.set(key, { ...row });
  }

  /** The per-file fetches counted since the last take, emptied. */
  takeFiles(): PathFetchCount[] {
    const taken = [...this.files.values()];
    this.files = new Map();
    return taken;
  }

  /** Puts back per-file counts a failed flush could not write (within the same bound). */
  restoreFiles(rows: readonly PathFetchCount[]): void {
    for (const row of rows) this.addFile(row);
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
