// The events of a NAR that entered a cache (docs/caches.md, "Events"): cache.nar.upload (durable,
// to the cache's webhooks), cache.nar.signed (live: which cache's key signed it) and cache.changed
// (the board's ping). Only for a path the upload added: a retry of a held path says nothing.
// They are written in a transaction of their own right after the path's rows commit (the commit
// belongs to the storage layer's ingest); a crash between the two loses the event, not the path.
import type { Events } from '../../storage/index.js';

export interface AddedNar {
  cache: { id: string; name: string; keyName: string };
  storePath: string;
  narHash: string;
  narSize: number;
  fileHash: string;
  fileSize: number;
  /** the uploading account, when a user uploaded it (not a worker) */
  user?: string;
}

export async function announceAddedNar(events: Events, nar: AddedNar): Promise<void> {
  await announceAddedNars(events, [nar]);
}

/**
 * The events of several paths added to one cache together (a batched ingest): each path's
 * cache.nar.upload and cache.nar.signed, one cache.changed, in one transaction.
 */
export async function announceAddedNars(events: Events, nars: readonly AddedNar[]): Promise<void> {
  const first = nars[0];
  if (first === undefined) return;
  const scope = { cacheId: first.cache.id };
  await events.transaction(async (_tx, emit) => {
    for (const nar of nars) {
      emit('cache.nar.upload', {
        cache: nar.cache.name, store_path: nar.storePath, nar_hash: nar.narHash, nar_size: nar.narSize,
        file_hash: nar.fileHash, file_size: nar.fileSize, ...(nar.user === undefined ? {} : { user: nar.user }),
      }, scope);
      emit('cache.nar.signed', { cache: nar.cache.name, store_path: nar.storePath, key_name: nar.cache.keyName }, scope);
    }
    emit('cache.changed', { cache: first.cache.name, reason: 'nar.upload' }, scope);
  });
}
