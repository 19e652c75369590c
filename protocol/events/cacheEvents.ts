// Caches and garbage collection. Durable cache events reach the cache's webhooks; the traffic
// events (fetched, served, signed, changed) are live-only.
import { z } from 'zod';
import { Bytes, CacheLabel, Count, ProjectLabel, StorePath, Username, Uuid, durableEvent, transientEvent } from './eventFields.js';

const Role = z.enum(['Admin', 'Write', 'View']);
const Changes = z.array(z.string().max(64)).max(64);
const NarHash = z.string().min(1).max(100);

const Cache = z.looseObject({ cache: CacheLabel, cache_id: Uuid, public: z.boolean().optional(), changes: Changes.optional() });
const CacheMember = z.looseObject({ cache: CacheLabel, user: Username, role: Role.optional() });
const CacheSubscription = z.looseObject({ cache: CacheLabel, project: ProjectLabel.optional(), organization: z.string().max(63).optional(), mode: z.number().int().min(0).max(2).optional() });

const NarUpload = z.looseObject({
  cache: CacheLabel,
  store_path: StorePath,
  nar_hash: NarHash,
  nar_size: Bytes,
  file_hash: z.string().max(100).optional(),
  file_size: Bytes.optional(),
  /** the uploading user, when a user uploaded it (not a worker) */
  user: Username.optional(),
});
const NarDelete = z.looseObject({ cache: CacheLabel, hash: z.string().min(1).max(100), store_path: StorePath.optional() });

const GcSweep = z.looseObject({
  cache: CacheLabel.optional(),
  /** ttl, storage, partial (unfinished uploads) or orphan (blobs no row points to) */
  reason: z.string().max(32).optional(),
  paths: Count,
  bytes: Bytes,
});

export const cacheEventDefinitions = {
  'cache.create': durableEvent('cache', 'a cache was created', Cache),
  'cache.update': durableEvent('cache', 'a cache\'s settings or active flag changed', Cache),
  'cache.delete': durableEvent('cache', 'a cache was deleted', Cache),
  'cache.nar.upload': durableEvent('cache', 'a NAR was uploaded into a cache', NarUpload),
  'cache.nar.delete': durableEvent('cache', 'a cached path was deleted from a cache', NarDelete),
  'cache.member.create': durableEvent('cache', 'a member joined a cache', CacheMember),
  'cache.member.update': durableEvent('cache', 'a cache member\'s role changed', CacheMember),
  'cache.member.delete': durableEvent('cache', 'a member left a cache', CacheMember),
  'cache.invitation.create': durableEvent('cache', 'a user was invited to a cache', CacheMember),
  'cache.subscription.request': durableEvent('cache', 'a project asked to subscribe to the cache', CacheSubscription),
  'cache.subscription.approve': durableEvent('cache', 'a subscription request was approved', CacheSubscription),
  'cache.subscription.deny': durableEvent('cache', 'a subscription request was denied', CacheSubscription),

  'cache.changed': transientEvent('cache', 'something on the cache board changed: a ping to refetch /board/cache', z.looseObject({ cache: CacheLabel, reason: z.string().max(64).optional() })),
  'cache.nar.fetched': transientEvent('cache', 'a client downloaded a NAR', z.looseObject({ cache: CacheLabel, hash: z.string().max(100), bytes: Bytes })),
  'cache.narinfo.served': transientEvent('cache', 'a client asked for a narinfo', z.looseObject({ cache: CacheLabel, hash: z.string().max(100), hit: z.boolean() })),
  'cache.nar.signed': transientEvent('cache', 'a fresh upload was signed into a cache (names that cache)', z.looseObject({ cache: CacheLabel, store_path: StorePath, key_name: z.string().max(200).optional() })),

  'gc.swept': durableEvent('gc', 'a sweep removed cached paths or blobs', GcSweep),
  'gc.deep_started': durableEvent('gc', 'a closure-aware collection started', z.looseObject({ cache: CacheLabel.optional() })),
  'gc.deep_finished': durableEvent('gc', 'a closure-aware collection finished', z.looseObject({ cache: CacheLabel.optional(), paths: Count, bytes: Bytes, duration_ms: Count.optional() })),
};
