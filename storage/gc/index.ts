// The public face of storage/gc/: the queries of garbage collection (docs/gc.md).
export { retainedEvaluationIds } from './retainedEvaluations.js';
export { computeLiveSet, topUpLiveSet, addPinnedClosures } from './liveSet.js';
export { pathsPastTtl, cachesOverLimit, instanceExcessBytes, leastRecentlyUsed, removePaths, type PathKey, type RemovedPath, type TtlRules } from './collectPaths.js';
export { markOrphanDerivations, deleteOrphanDerivations } from './orphanDerivations.js';
export { storedFileHashes, missingBlobs, removeCopiesOfMissingBlob } from './missingBlobs.js';
export { requestGcRun, pendingGcRequest, startGcRun, finishGcRun, failGcRun, failInterruptedGcRuns, lastGcRunEnd, findGcRun, deleteOldGcRuns, recentGcRuns, type GcRunRow, type GcRunKind } from './gcRuns.js';
export { upsertCachePin, deleteCachePin, listCachePins, countCachePins, type CachePinRow } from './cachePins.js';
export { evictForRoom } from './roomForUpload.js';
