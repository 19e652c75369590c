// The public face of storage/nars/: what other folders import from it (DESIGN.md, Layout).
export { openNarStorage, type NarStorage, type NarStorageConfig, type NarStorageDeps } from './narStorage.js';
export { narBlobKey, stagingArea, type StagingArea } from './narLocations.js';
export { type NarReads, renderStoredNarinfo, POSITIVE_TTL_MS, NEGATIVE_TTL_MS } from './narReads.js';
export { type NarUploads, type FinalizeRequest } from './narUploads.js';
export { type CrashPoint, type CrashPoints } from './crashPoints.js';
export { type IngestOutcome, STORED_ZSTD_LEVEL } from './ingest.js';
export { type PathRemoval } from './pathDeletion.js';
export { type SweepReport } from './sweeper.js';
export { HotCache } from './hotCache.js';
export { UploadProblem, isUploadProblem, type UploadProblemKind } from './uploadProblem.js';
export { type StagedUploadRow, type ListingRow } from './sql/index.js';
export { ReferenceScanner } from './referenceScanner.js';
export { directoryArchive, narSlice, type ArchiveProgress } from './narContents.js';
export { cacheStorage, cacheStorageLeft, STORAGE_GB, type CacheStorage } from './cacheStorageLeft.js';
export { listCachePaths, type CachePathQuery } from './sql/listCachePaths.js';
export { findCachePath } from './sql/findCachePath.js';
export { cacheContentStats, type CacheContentStats } from './sql/cacheContentStats.js';
export { type CachePathRow } from './sql/cachePathRow.js';
