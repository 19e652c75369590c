// The binary cache's storage, assembled once by the composition root (cli/kiln.ts) and shared by
// the cache routes, the REST upload routes and the NAR management service, so that all of them
// see one hot cache: an upload or delete made through any of them is visible at once in this process.
import type { Logger } from 'pino';
import type { Sql } from 'postgres';
import type { Config } from '../../config/index.js';
import type { BlobStore } from '../blobs/index.js';
import type { CpuPool } from '../cpuPool.js';
import type { CrashPoints } from './crashPoints.js';
import { fetchRecorder, type FetchRecorder } from './fetchRecorder.js';
import { HotCache } from './hotCache.js';
import { stagingArea, type StagingArea } from './narLocations.js';
import { narReads, type HotValue, type NarReads } from './narReads.js';
import { narUploads, type NarUploads } from './narUploads.js';
import { NarFrameSets } from './narFrameSets.js';
import { StagedChecks } from './stagedChecks.js';
import { STORED_ZSTD_LEVEL } from './ingest.js';
import { deleteBlobIfUnreferenced, removePathFromCache, type PathRemoval } from './pathDeletion.js';
import { localNarFile } from './storedNarFile.js';
import { DEFAULT_READ_PACE, type ReadPaceLimits } from './readPace.js';
import { StorageReadGate } from './storageReadGate.js';
import { sweepNarStorage, type SweepReport } from './sweeper.js';
import type { IngestOutcome } from './ingestOutcome.js';
import type { FinalizeRequest } from './narUploads.js';
import { UploadProblem } from './uploadProblem.js';

export type NarStorageConfig = Pick<
  Config,
  | 'baseDir' | 'nar.hotCacheBytes' | 'nar.smallBytes' | 'nar.maxUploadSize' | 'nar.partialTtlSecs' | 'gc.narUploadGraceHours' | 'gc.intervalSecs'
  | 'nar.maxConcurrentDownloads' | 'nar.maxConcurrentServes' | 'nar.storageOpenTimeoutSecs'
>;

export interface NarStorageDeps {
  /** the binary cache's pool (database.cache.*) */
  sql: Sql;
  blobs: BlobStore;
  cpu: CpuPool;
  config: NarStorageConfig;
  log: Logger;
  /**
   * The key of this process's instance lease (storage/db/advisoryLocks.ts), held for as long
   * as the storage is open: a staged upload this process works on is claimed under it, so that
   * server processes sharing the database and baseDir never work on one upload at once.
   */
  leaseKey: number;
  /** the crash test's hold on finalize's steps (crashPoints.ts) */
  crashPoints?: CrashPoints;
  /** the minimum pace of a held storage read (readPace.ts); tests make it strict */
  readPace?: ReadPaceLimits;
}

export interface NarStorage {
  readonly blobs: BlobStore;
  readonly staging: StagingArea;
  readonly reads: NarReads;
  /** nar.maxConcurrentDownloads as one count with the serving threads' reads (sharedReadPlaces.ts). */
  readonly readPlaces: ThreadReadPlaces;
  readonly uploads: NarUploads;
  readonly fetches: FetchRecorder;
  /** Inside the request's transaction (the NAR management API): see pathDeletion.ts. */
  removePathFromCache: typeof removePathFromCache;
  /**
   * After the transaction committed: forgets the path in this process at once, and resolves when
   * the blob is deleted (if no cached path points at it any more). Call it after the response.
   */
  settleRemoval(removal: PathRemoval): Promise<void>;
  /** Signs a NAR file the store already holds into a cache for the path `request.info` describes, after checking it. */
  ingestStoredFile(request: Omit<FinalizeRequest, 'uploadKey' | 'submitted'>, fileHash: string): Promise<IngestOutcome>;
  sweep(now?: Date): Promise<SweepReport>;
  /** What the hot cache holds and how often lookups found what they asked for, since the start (kiln_hot_cache_*). */
  hotCacheStats(): HotCacheStats;
  /** Narinfo answers serving threads gave from their own memory: counted as hits of the hot cache (kiln_hot_cache_lookups_total). */
  countThreadMemoryHits(count: number): void;
  /** Stops the sweeper timer and writes the pending fetch times. */
  close(): Promise<void>;
}

export interface ThreadReadPlaces {
  /** the count's shared memory, for SharedReadPlaces in a thread */
  readonly buffer: SharedArrayBuffer;
  readonly limit: number;
  /** nar.storageOpenTimeoutSecs: how long a thread's reader waits for a place before 503 storage_busy */
  readonly openTimeoutSecs: number;
  /** the minimum pace of a held read, as the main thread's */
  readonly pace: ReadPaceLimits;
  /** A thread gave places back, or ended holding `lost` of them: readers waiting here take them. */
  freed(lost?: number): void;
}

export interface HotCacheStats {
  bytes: number;
  capacityBytes: number;
  entries: number;
  hits: number;
  misses: number;
}

export function openNarStorage(deps: NarStorageDeps): NarStorage {
  const { sql, blobs, cpu, config, log, leaseKey } = deps;
  const staging = stagingArea(config.baseDir);
  const hot = new HotCache<HotValue>(config['nar.hotCacheBytes']);
  let threadMemoryHits = 0;
  const fetches = fetchRecorder(sql, log);
  const gate = new StorageReadGate({
    maxReads: config['nar.maxConcurrentDownloads'],
    maxReadsPerWorker: config['nar.maxConcurrentServes'],
    openTimeoutSecs: config['nar.storageOpenTimeoutSecs'],
    pace: deps.readPace ?? DEFAULT_READ_PACE,
  });
  const reads = narReads({ sql, blobs, hot, fetches, gate, smallBytes: config['nar.smallBytes'] });
  const frames = new NarFrameSets(cpu, STORED_ZSTD_LEVEL);
  const checks = StagedChecks.open();
  const uploads = narUploads({ sql, blobs, cpu, staging, frames, checks, reads, maxUploadSize: config['nar.maxUploadSize'], leaseKey, ...(deps.crashPoints ? { crashPoints: deps.crashPoints } : {}) });
  const sweepDeps = { sql, blobs, staging, log, partialTtlSecs: config['nar.partialTtlSecs'], graceHours: config['gc.narUploadGraceHours'] };
  let sweeping: Promise<unknown> = Promise.resolve();
  const sweep = (now?: Date): Promise<SweepReport> => {
    const run = sweeping.then(() => sweepNarStorage(sweepDeps, now));
    sweeping = run.catch(() => undefined);
    return run;
  };
  const timer = setInterval(() => {
    sweep().catch((err: unknown) => log.error({ err }, 'the NAR storage sweep failed; it runs again at the next interval'));
  }, config['gc.intervalSecs'] * 1000);
  timer.unref();

  return {
    blobs,
    staging,
    reads,
    readPlaces: {
      buffer: gate.shared.buffer, limit: gate.shared.limit, openTimeoutSecs: config['nar.storageOpenTimeoutSecs'], pace: deps.readPace ?? DEFAULT_READ_PACE,
      freed: (lost) => gate.placesFreed(lost),
    },
    uploads,
    fetches,
    removePathFromCache,
    async settleRemoval(removal) {
      if (!removal.removed) return;
      reads.forget(removal.cacheId, removal.hashPart, removal.fileHash ?? undefined);
      if (removal.lastCopy && removal.fileHash !== null) await deleteBlobIfUnreferenced(sql, blobs, removal.fileHash);
    },
    async ingestStoredFile(request, fileHash) {
      const local = await localNarFile(blobs, staging, fileHash);
      if (local === null) throw new UploadProblem('no_staged_upload', `the NAR file ${fileHash} is not in storage; upload it again`);
      try {
        return await uploads.ingestFile({ ...request, file: local.path, compression: 'zstd' });
      } finally {
        await local.release();
      }
    },
    sweep,
    hotCacheStats: () => ({ bytes: hot.bytes, capacityBytes: hot.capacityBytes, entries: hot.size, hits: hot.hits + threadMemoryHits, misses: hot.misses }),
    countThreadMemoryHits(count) {
      threadMemoryHits += count;
    },
    async close() {
      clearInterval(timer);
      await sweeping;
      await fetches.close();
      await checks.close();
    },
  };
}
