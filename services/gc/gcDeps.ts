// What garbage collection is built from (docs/gc.md).
import type { Sql } from 'postgres';
import type { Config, Logger } from '../../config/index.js';
import type { Clock } from '../../supervisors/index.js';
import type { CrashPoints, Events, NarStorage } from '../../storage/index.js';

export interface GcDeps {
  /** the pool collection runs on (the web pool; its statements are short, in pages) */
  sql: Sql;
  config: Pick<Config, 'gc.intervalSecs' | 'gc.deepIntervalSecs' | 'gc.deepPaceMs' | 'gc.narTtlHours' | 'gc.narUploadGraceHours'
    | 'gc.orphanDerivationHours' | 'gc.wedgedEvalHours' | 'eval.maxKeep' | 'cache.maxStorageGb'>;
  log: Logger;
  /** gc.* events, durable, in their own transactions */
  events: Events;
  /** forgets collected paths in this process and deletes their blobs; its sweep is part of the deep round */
  nars: NarStorage;
  /** TTL cut-offs and the schedule of passes read it; tests move it */
  clock: Clock;
  /** waits gc.deepPaceMs between units of a background deep round; tests pass one that records instead of waiting */
  pause?: (ms: number) => Promise<void>;
  /** the crash test's holds (storage/nars/crashPoints.ts) */
  crashPoints?: CrashPoints;
}
