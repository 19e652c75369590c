// Hearing of cache changes on the event bus: the memos of this process (who may read a cache, its
// upstream list) subscribe to `cache.changed` themselves, so a change made through any server process
// of the installation reaches them (the bus relays over Redis or PostgreSQL, storage/bus/).
import type { BusEvent, EventBus } from '../../storage/index.js';

/** One `cache.changed` event: which cache, and why (create, update, delete, enabled, disabled, key, nar.upload, upstream.put, …). */
export interface CacheChange {
  cacheId: string | null;
  cache: string;
  reason: string | null;
}

/** Reasons that change who may see a cache or what it serves under its name: access memos forget on these. */
export const CACHE_SETTINGS_REASONS: ReadonlySet<string> = new Set(['create', 'update', 'delete', 'enabled', 'disabled', 'key']);

/** A key rotation: the memos forget the public key, the sign sweep of every process wakes (signSweep.ts). */
export const KEY_ROTATED_REASONS: ReadonlySet<string> = new Set(['key']);

function cacheChangeOf(event: BusEvent): CacheChange | null {
  if (event.event !== 'cache.changed') return null;
  let content: unknown;
  try {
    content = (JSON.parse(event.frame) as { content?: unknown }).content;
  } catch {
    return null;
  }
  if (typeof content !== 'object' || content === null) return null;
  const { cache, reason } = content as { cache?: unknown; reason?: unknown };
  if (typeof cache !== 'string') return null;
  return { cacheId: event.scope.cacheId ?? null, cache, reason: typeof reason === 'string' ? reason : null };
}

/**
 * Calls `listener` for each `cache.changed` event whose reason is in `reasons`, from this process
 * (synchronously, once the change committed) or another one. Returns the unsubscribe.
 */
export function onCacheChanged(bus: Pick<EventBus, 'subscribe'>, reasons: ReadonlySet<string>, listener: (change: CacheChange) => void): () => void {
  return bus.subscribe((event) => {
    if (event.event !== 'cache.changed') return;
    const change = cacheChangeOf(event);
    if (change !== null && change.reason !== null && reasons.has(change.reason)) listener(change);
  });
}
