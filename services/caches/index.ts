// The public face of services/caches/: what other domains and folders import from it.
export { type BinaryCache, type BinaryCacheAccess, type CacheAccess, createBinaryCacheAccess } from './binaryCacheAccess.js';
export { cacheKeyName, cachePublicKeyText, generateCacheKey, keyHost, openCacheKey } from './cacheKeys.js';
export { basicPassword, cacheReadTokenOpens, looksLikeCacheReadToken, mintCacheReadToken } from './cacheReadTokens.js';
export { type CacheServices, createCacheServices } from './cacheServices.js';
export { cacheSigningKeys } from './cacheSigningKeys.js';
export { cacheStorageLimits, type CacheStorageLimits, LOW_STORAGE_BYTES } from './cacheStorage.js';
export { type IngestTarget, narIngest, type NarIngest, UploadBusy } from './narIngest.js';
export { markManyOutputsNotCached } from './evictedOutputs.js';
export { narUploadService, type NarUploadService } from './narUploads.js';
export { outputsCached, type OutputsQuestion, type ProjectCache, projectCaches, readable, writable } from './projectCaches.js';
export { listProjectSubscriptions, type ProjectSubscriptions } from './subscriptionRows.js';
export { subscriptionsService } from './subscriptions.js';
export type { Upstreams } from './upstreams.js';
export { runSignSweep, type SignSweepReport } from './signSweep.js';
export { runDebugIndexBackfill, type DebugIndexReport } from './debugIndex.js';
export { CACHE_SETTINGS_REASONS, KEY_ROTATED_REASONS, onCacheChanged } from './cacheChanges.js';
