// The public face of services/caches/: what other domains and folders import from it.
export { subscriptionsService } from './subscriptions.js';
export { readable, writable, type ProjectCache, projectCaches, outputsCached } from './projectCaches.js';
export { type CacheStorageLimits, LOW_STORAGE_BYTES, cacheStorageLimits } from './cacheStorage.js';
export { type IngestTarget, type NarIngest, narIngest, type NarIngestDeps } from './narIngest.js';
export { listProjectSubscriptions, type ProjectSubscriptions } from './subscriptionRows.js';
export { generateCacheKey, keyHost, openCacheKey, cachePublicKeyText, cacheKeyName, type CacheKeyColumns } from './cacheKeys.js';
export { binaryCacheAccess, CACHE_SETTINGS_TTL_MS, CREDENTIALS_TTL_MS, type BinaryCache, type BinaryCacheAccess, type CacheAccess } from './binaryCacheAccess.js';
export { narUploadService, type NarUploadService, type SingleShotReader } from './narUploads.js';
export { cacheSigningKeys, type CacheSigningKeys } from './cacheSigningKeys.js';
export { createCacheServices, type CacheServices } from './cacheServices.js';
export type { CacheDeps } from './cacheDeps.js';
export type { CacheStats, NarDeletion, NarPage, NarView } from './cacheNars.js';
export type { UpstreamView } from './cacheUpstreams.js';
export { mintCacheReadToken, cacheReadTokenOpens } from './cacheReadTokens.js';
export type { CacheTraffic } from './cacheTraffic.js';
export { upstreamService, type UpstreamBytes, type UpstreamCache, type UpstreamDeps, type UpstreamFile, type Upstreams } from './upstreams.js';
