// A cache's signing keys (kiln extension; docs/binary-cache.md, "Key rotation"): what
// POST /caches/{cache}/key/rotate takes and what it and GET /caches/{cache}/keys answer.
import { z } from 'zod';

/** At most a year: a leaked key should not stay trusted longer than that by accident. */
export const MAX_KEY_OVERLAP_HOURS = 8760;

export const RotateCacheKeyBody = z.strictObject({
  /** hours the old key stays listed and its signatures stay served; default cache.keyOverlapHours; 0 drops it at once */
  overlap_hours: z.number().int().min(0).max(MAX_KEY_OVERLAP_HOURS).optional(),
  /**
   * emergency re-rotation (a leaked key): skips cache.keyRotationMinIntervalSecs. For the cache's
   * owner, or a caller with superuser powers (any cache); recorded on the cache.update event
   */
  force: z.boolean().optional(),
});
export type RotateCacheKeyBody = z.infer<typeof RotateCacheKeyBody>;

const Timestamp = z.iso.datetime({ offset: true });

/** The keys a client may trust for this cache: the current one, and the previous one during its overlap. */
export const CacheKeysView = z.strictObject({
  /** `<key name>:<base64>`, what new clients add to trusted-public-keys */
  public_key: z.string(),
  previous: z.strictObject({
    public_key: z.string(),
    rotated_at: Timestamp,
    /** narinfos stop carrying this key's signatures at the first sign sweep after this time */
    listed_until: Timestamp,
  }).nullable(),
});
export type CacheKeysView = z.infer<typeof CacheKeysView>;
