// The public face of services/gc/: garbage collection and retention of caches and the build graph (docs/gc.md).
export { GarbageCollector } from './garbageCollector.js';
export { cachePinsService, type CachePinsService } from './cachePins.js';
export { gcAdminService, type GcAdminService } from './gcAdmin.js';
export { deleteOldCollectionRuns } from './gcRunRetention.js';
