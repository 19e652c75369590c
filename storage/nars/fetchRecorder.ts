// last_fetched_at without a write per request: narinfo hits are collected in memory and written in
// one statement every few seconds (and at shutdown). A crash loses at most one interval of
// fetch times, which only makes garbage collection a little more eager about those paths.
import type { Logger } from 'pino';
import type { Sql } from 'postgres';
import { touchPathSignatures } from './sql/index.js';

export const FETCH_FLUSH_INTERVAL_MS = 5_000;

export interface FetchRecorder {
  record(cacheId: string, hashPart: string): void;
  /** Writes what was collected; resolves when it is in the database. */
  flush(): Promise<void>;
  /** Stops the timer after a last flush. */
  close(): Promise<void>;
}

export function fetchRecorder(sql: Sql, log: Logger, intervalMs = FETCH_FLUSH_INTERVAL_MS): FetchRecorder {
  let pending = new Map<string, [string, string]>();
  let writing: Promise<void> = Promise.resolve();
  const flush = (): Promise<void> => {
    if (pending.size === 0) return writing;
    const batch = [...pending.values()];
    pending = new Map();
    writing = writing.then(() =>
      touchPathSignatures(sql, batch.map(([c]) => c), batch.map(([, h]) => h), new Date()).catch((err: unknown) => {
        log.warn({ err, paths: batch.length }, 'could not record last_fetched_at; the fetch times of this batch are lost');
      }),
    );
    return writing;
  };
  const timer = setInterval(() => void flush(), intervalMs);
  timer.unref();
  return {
    record(cacheId, hashPart) {
      pending.set(`${cacheId}/${hashPart}`, [cacheId, hashPart]);
    },
    flush,
    async close() {
      clearInterval(timer);
      await flush();
    },
  };
}
