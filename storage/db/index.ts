// The public face of storage/db/: what other folders import from it (DESIGN.md, Layout).
export { openDatabase, type Database, type DatabaseConfig, type OpenDatabaseOptions } from './openDatabase.js';
export { migrate, type MigrateOptions } from './migrate.js';
export { KILN_SESSION } from './pools.js';
export { readMigrations, migrationSetChecksum, MIGRATIONS_DIR, type MigrationFile } from './migrationFiles.js';
export { startLocalDb, type LocalDb, type LocalDbOptions } from './local/startLocalDb.js';
export { localDbSettings, LOCAL_DB_DEFAULTS } from './localDbSettings.js';
export { parseDatabaseUrl, describeTarget, nodePostgresOptions, type DatabaseTarget, type NodePostgresOptions } from './databaseUrl.js';
export type { Sql } from 'postgres';
export {
  acquireInstanceLease, leaseHeldCondition, leaseLostCondition, trySessionLock, LEASE_NAMESPACE,
  type HeldLock,
} from './advisoryLocks.js';
export {
  activeCachesNamed, allCacheRows, cacheIdNamed, cacheNameOf, cacheRowById, cacheRowNamed, cacheSealedKey, cacheServingRow, candidateCacheRows, declareCache, deleteCache,
  insertCache, releaseUndeclaredCaches, setCacheActive, subscribedCacheRows, updateCacheSettings, cacheNames, cacheStorageTotals,
  rotateCacheKey, cachePreviousKey, cachePreviousSealedKey, cacheKeyNames, endedPreviousKeys, endPreviousKey,
  type CacheKeyColumns, type CacheRow, type CacheSettings, type CacheServingRow, type NewCache, type SubscribedCacheRow,
} from './caches.js';
export type { Queryable } from './queryable.js';
export { pipelinedTransaction } from './pipelinedTransaction.js';
export { deleteInSlices, retentionCutoff } from './sliceDeletes.js';
export { arrayLiteral, copyInto, copyRow } from './copyText.js';
export {
  addTrafficMinutes, rollUpTraffic, pruneTraffic, trafficSeries, trafficTotalsSince, storedTotalsOf,
  type TrafficCounts, type TrafficMinute,
} from './cacheTraffic.js';
export { addPathFetches, prunePathFetches, topFetchedPaths } from './pathFetches.js';
export {
  addPhaseSamples, rollUpPhases, prunePhases, phaseSeries,
  type PhaseSample,
} from './phaseSamples.js';
export { rollupCutoff } from './rollupEdge.js';
export { INSTANCE_METRICS, NO_ID, pruneSampleRollups, rollUpSamples, sampleRollupSeries, WORKER_METRICS, type SampleRollupPoint } from './sampleRollups.js';
