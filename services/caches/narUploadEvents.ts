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
  const scope = { cacheId: nar.cache.id };
  await events.transaction(async (_tx, emit) => {
    emit('cache.nar.upload', {
      cache: nar.cache.name, store_path: nar.storePath, nar_hash: nar.narHash, nar_size: nar.narSize,
      file_hash: nar.fileHash, file_size: nar.fileSize, ...(nar.user === undefined ? {} : { user: nar.user }),
    }, scope);
    emit('cache.nar.signed', { cache: nar.cache.name, store_path: nar.storePath, key_name: nar.cache.keyName }, scope);
    emit('cache.changed', { cache: nar.cache.name, reason: 'nar.upload' }, scope);
  });
}
