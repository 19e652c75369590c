// Garbage collection (kiln extension, docs/gc.md): pins (/caches/{cache}/pins…) and the
// superuser's passes and deep rounds (/admin/gc…).
import { z } from 'zod';

const Timestamp = z.iso.datetime({ offset: true });

/** PUT /caches/{cache}/pins/{hash}: an empty body pins until unpinned. */
export const PinBody = z.strictObject({
  /** the pin lapses then; must lie in the future */
  expires_at: Timestamp.nullable().optional(),
  /** the pin lapses this many hours from now (instead of expires_at) */
  expires_in_hours: z.number().int().positive().max(1_000_000).optional(),
}).refine((b) => b.expires_at === undefined || b.expires_in_hours === undefined, { message: 'give expires_at or expires_in_hours, not both' });
export type PinBody = z.infer<typeof PinBody>;

export const PinView = z.strictObject({
  hash: z.string(),
  /** the store path as the cache holds it; null when the cache no longer holds it */
  store_path: z.string().nullable(),
  /** who pinned it (username); null when unknown */
  created_by: z.string().nullable(),
  created_at: Timestamp,
  expires_at: Timestamp.nullable(),
  /** an expired pin protects nothing; it stays listed until unpinned */
  expired: z.boolean(),
});
export type PinView = z.infer<typeof PinView>;

/** GET /caches/{cache}/pins?page=&per_page=: pages as every paged list of the API (50 by default, at most 200). */
export const PinListQuery = z.strictObject({
  page: z.coerce.number().int().min(1).max(1_000_000).default(1),
  per_page: z.coerce.number().int().min(1).max(200).default(50),
});
export type PinListQuery = z.infer<typeof PinListQuery>;

/** One page of a cache's pins, newest first; `total` counts them all. */
export const PinPage = z.strictObject({
  pins: z.array(PinView),
  page: z.number().int(),
  per_page: z.number().int(),
  total: z.number().int(),
});
export type PinPage = z.infer<typeof PinPage>;

/** POST /admin/gc: request a collection pass, or with deep a deep round. */
export const GcRequestBody = z.strictObject({ deep: z.boolean().default(false) });
export type GcRequestBody = z.infer<typeof GcRequestBody>;

/** A run's id in paths: digits. */
export const GcRunId = z.string().regex(/^[0-9]{1,18}$/, 'expected a collection run id (digits)');

export const GcRunView = z.strictObject({
  id: z.string(),
  kind: z.enum(['pass', 'deep']),
  state: z.enum(['requested', 'running', 'finished', 'failed']),
  requested_at: Timestamp.nullable(),
  started_at: Timestamp.nullable(),
  finished_at: Timestamp.nullable(),
  /** counts and bytes (docs/gc.md, "Results"); null until finished */
  result: z.record(z.string(), z.json()).nullable(),
  error: z.string().nullable(),
});
export type GcRunView = z.infer<typeof GcRunView>;

/** DELETE /caches/{cache}/pins/{hash}: the pin that was removed. */
export const PinRemovalView = z.strictObject({ hash: z.string(), cache: z.string() });
export type PinRemovalView = z.infer<typeof PinRemovalView>;

/** GET /admin/gc: the most recent runs, newest first. */
export const GcRunsView = z.strictObject({ runs: z.array(GcRunView) });
export type GcRunsView = z.infer<typeof GcRunsView>;
