// What the binary cache routes read, with the hot cache in front: a narinfo hit never touches the
// database while its entry lives, and concurrent misses of one key share one query. Entries about
// a cache's contents expire (another server process may have changed them); NAR bytes are
// content-addressed and never go stale.
import type { Sql } from 'postgres';
import { narUrl, renderNarinfo } from '../../protocol/index.js';
import type { BlobRange, BlobRead, BlobStore } from '../blobs/index.js';
import type { FetchRecorder } from './fetchRecorder.js';
import type { HotCache } from './hotCache.js';
import type { StorageReadGate } from './storageReadGate.js';
import { narBlobKey } from './narLocations.js';
import { findCacheFile, findListingRow, findNarinfoRows, type ListingRow, type NarinfoRow } from './sql/index.js';

/** How long this process trusts what it learned about a cache's contents. */
export const POSITIVE_TTL_MS = 60_000;
/** Misses are remembered briefly: Nix asks again for paths it has just been told are missing. */
export const NEGATIVE_TTL_MS = 5_000;
/** Paths looked up in one query at most. */
const LOOKUPS_PER_QUERY = 500;

export type HotValue = Buffer | { fileSize: number } | null;

export interface NarReads {
  /** The signed narinfo text of a path the cache holds, or null. */
  narinfo(cacheId: string, hashPart: string): Promise<Buffer | null>;
  /** The same answer from memory without waiting, or undefined when only narinfo() can tell. */
  narinfoInMemory(cacheId: string, hashPart: string): Buffer | null | undefined;
  /** narFile's answer when this process knows it, else undefined. */
  narFileInMemory(cacheId: string, fileHash: string): { fileSize: number } | null | undefined;
  /** smallNar's bytes when they are in memory, else undefined. */
  smallNarInMemory(fileHash: string): Buffer | undefined;
  /** The stored file's size when a path of this cache points at it, or null. */
  narFile(cacheId: string, fileHash: string): Promise<{ fileSize: number } | null>;
  /** A whole small NAR file from memory or storage; null when the blob is missing. Throws StorageBusy as openNar does. */
  smallNar(fileHash: string, worker?: string): Promise<Buffer | null>;
  /** Whether the NAR file's blob is in storage (a reply's status is chosen before its body is read). */
  narStored(fileHash: string): Promise<boolean>;
  /**
   * A NAR file (or a range of it) from storage, for a caller done with each chunk when it asks for
   * the next; `worker` names the worker asking, for its own bound. Throws StorageBusy when the read
   * cannot start within nar.storageOpenTimeoutSecs, ReaderGone when `gone` (the request's abort) fires first.
   */
  openNar(fileHash: string, range?: BlobRange, worker?: string, gone?: AbortSignal): Promise<BlobRead | null>;
  /** A URL the client may fetch the file from directly, or null when the store has none. */
  presignedNar(fileHash: string, expiresSecs: number): Promise<string | null>;
  /** The local file a serving thread reads the NAR file from, or null when the store has none (S3). */
  narFilePath(fileHash: string): string | null;
  /** The .ls listing of a path the cache holds (not kept in memory: its routes are rate limited). */
  listing(cacheId: string, hashPart: string): Promise<ListingRow | null>;
  /** Forgets what this process knows of a path in a cache (after an upload or a delete). */
  forget(cacheId: string, hashPart: string, fileHash?: string): void;
  /** Hears of every forget (serving threads forget the path, and their grant of its file, too); returns the unsubscribe. */
  onForget(listener: (cacheId: string, hashPart: string, fileHash?: string) => void): () => void;
}

export interface NarReadsDeps {
  sql: Sql;
  blobs: BlobStore;
  hot: HotCache<HotValue>;
  fetches: FetchRecorder;
  /** bounds every read of NAR bytes from storage */
  gate: StorageReadGate;
  /** nar.smallBytes: NAR files up to this size are kept in memory */
  smallBytes: number;
}

const narinfoKey = (cacheId: string, hashPart: string) => `i:${cacheId}:${hashPart}`;
const fileKey = (cacheId: string, fileHash: string) => `f:${cacheId}:${fileHash}`;
const bytesKey = (fileHash: string) => `b:${fileHash}`;

export function renderStoredNarinfo(row: NarinfoRow): string {
  return renderNarinfo({
    storePath: row.storePath,
    url: narUrl(row.fileHash),
    compression: 'zstd',
    fileHash: `sha256:${row.fileHash}`,
    fileSize: row.fileSize,
    narHash: row.narHash,
    narSize: row.narSize,
    references: row.references,
    ...(row.deriver === null ? {} : { deriver: row.deriver }),
    // Nix accepts a narinfo when any one Sig verifies: clients trusting either key of a rotation do.
    sigs: row.previousSignature === null ? [row.signature] : [row.signature, row.previousSignature],
    ...(row.ca === null ? {} : { ca: row.ca }),
  });
}

export function narReads(deps: NarReadsDeps): NarReads {
  const { sql, blobs, hot, fetches, gate } = deps;
  const forgetListeners = new Set<(cacheId: string, hashPart: string, fileHash?: string) => void>();
  const inflight = new Map<string, Promise<unknown>>();
  const once = <T>(key: string, load: () => Promise<T>): Promise<T> => {
    const running = inflight.get(key) as Promise<T> | undefined;
    if (running) return running;
    // a forget may have let a newer lookup of the key take its place: only its own entry goes
    const started = load().finally(() => inflight.get(key) === started && inflight.delete(key));
    inflight.set(key, started);
    return started;
  };

  // Lookups asked for in one turn of the event loop share one query per cache (`= any`): a busy
  // server's remembered misses expire a few at a time (5 s each, ~200 a second for 1,000 of them),
  // and the serving threads' refreshes ask for them in batches (docs/http.md, "Serving threads").
  /** `forgets`: the key's forgets counted when this lookup began */
  type Waiter = { resolve: (text: Buffer | null) => void; reject: (e: unknown) => void; forgets: number };
  /** cache id → hash part → the lookups waiting for the next query */
  const waiting = new Map<string, Map<string, Waiter[]>>();
  // Keys forgotten (an upload, a delete) while a lookup of them was under way: what that lookup
  // found may predate the change, so it is not kept, or a miss found just before an upload would
  // hide the upload for NEGATIVE_TTL_MS; and a request after the forget does not join it, it starts
  // a lookup of its own (review).
  const underWay = new Map<string, { lookups: number; forgets: number }>();
  const settled = (key: string, waiters: readonly Waiter[]): boolean => {
    const state = underWay.get(key)!;
    state.lookups -= waiters.length;
    if (state.lookups <= 0) underWay.delete(key);
    // kept only when no forget came since the newest of these lookups began
    return Math.max(...waiters.map((w) => w.forgets)) === state.forgets;
  };
  const lookUp = (cacheId: string, batch: [string, Waiter[]][]): void => {
    findNarinfoRows(sql, cacheId, batch.map(([hashPart]) => hashPart)).then((rows) => {
      for (const [hashPart, waiters] of batch) {
        const key = narinfoKey(cacheId, hashPart);
        const row = rows.get(hashPart);
        const value = row === undefined ? null : Buffer.from(renderStoredNarinfo(row));
        if (settled(key, waiters)) hot.set(key, value, value?.length ?? 0, value === null ? NEGATIVE_TTL_MS : POSITIVE_TTL_MS);
        for (const waiter of waiters) waiter.resolve(value);
      }
    }, (e: unknown) => {
      for (const [hashPart, waiters] of batch) {
        settled(narinfoKey(cacheId, hashPart), waiters);
        for (const waiter of waiters) waiter.reject(e);
      }
    });
  };
  const lookUpWaiting = (): void => {
    const batches = [...waiting];
    waiting.clear();
    for (const [cacheId, batch] of batches) {
      const all = [...batch];
      for (let at = 0; at < all.length; at += LOOKUPS_PER_QUERY) lookUp(cacheId, all.slice(at, at + LOOKUPS_PER_QUERY));
    }
  };

  const loadNarinfo = (cacheId: string, hashPart: string): Promise<Buffer | null> =>
    once(narinfoKey(cacheId, hashPart), () => new Promise<Buffer | null>((resolve, reject) => {
      if (waiting.size === 0) setImmediate(lookUpWaiting);
      const key = narinfoKey(cacheId, hashPart);
      const state = underWay.get(key) ?? { lookups: 0, forgets: 0 };
      state.lookups += 1;
      underWay.set(key, state);
      let batch = waiting.get(cacheId);
      if (batch === undefined) waiting.set(cacheId, (batch = new Map()));
      const waiters = batch.get(hashPart);
      const waiter = { resolve, reject, forgets: state.forgets };
      if (waiters === undefined) batch.set(hashPart, [waiter]);
      else waiters.push(waiter);
    }));

  // An expired answer is served once more while the query for a fresh one runs (at most one per
  // key): under load, requests do not queue behind the database every time an entry expires.
  // What another process changed still shows after one TTL and one query; this process's own
  // uploads and deletes drop the entry (forget), so they show at once.
  const narinfoInMemory = (cacheId: string, hashPart: string): Buffer | null | undefined => {
    const known = hot.peekEntry(narinfoKey(cacheId, hashPart));
    if (known === undefined) return undefined;
    if (known.expires <= hot.time()) loadNarinfo(cacheId, hashPart).catch(() => undefined); // the next request tries again
    const value = known.value as Buffer | null;
    if (value) fetches.record(cacheId, hashPart);
    return value;
  };

  return {
    narinfoInMemory,

    async narinfo(cacheId, hashPart) {
      const known = narinfoInMemory(cacheId, hashPart);
      if (known !== undefined) return known;
      const text = await loadNarinfo(cacheId, hashPart);
      if (text !== null) fetches.record(cacheId, hashPart);
      return text;
    },

    narFileInMemory: (cacheId, fileHash) => hot.get(fileKey(cacheId, fileHash)) as { fileSize: number } | null | undefined,
    smallNarInMemory: (fileHash) => hot.get(bytesKey(fileHash)) as Buffer | undefined,

    async narFile(cacheId, fileHash) {
      const key = fileKey(cacheId, fileHash);
      const known = hot.get(key) as { fileSize: number } | null | undefined;
      if (known !== undefined) return known;
      return once(key, async () => {
        const found = await findCacheFile(sql, cacheId, fileHash);
        hot.set(key, found, 16, found === null ? NEGATIVE_TTL_MS : POSITIVE_TTL_MS);
        return found;
      });
    },

    async smallNar(fileHash, worker) {
      const key = bytesKey(fileHash);
      const known = hot.get(key) as Buffer | undefined;
      if (known !== undefined) return known;
      return once(key, async () => {
        const read = await gate.open(() => blobs.get(narBlobKey(fileHash)), worker);
        if (read === null) return null;
        const chunks: Uint8Array[] = [];
        for await (const chunk of read.body) chunks.push(chunk);
        const bytes = Buffer.concat(chunks);
        hot.set(key, bytes, bytes.length);
        return bytes;
      });
    },

    narStored: async (fileHash) => (await blobs.stat(narBlobKey(fileHash))) !== null,
    openNar: (fileHash, range, worker, gone) => gate.open(() => blobs.get(narBlobKey(fileHash), range, { reuseChunks: true }), worker, gone),
    presignedNar: (fileHash, expiresSecs) => blobs.presignedUrl(narBlobKey(fileHash), expiresSecs),
    narFilePath: (fileHash) => blobs.localPath(narBlobKey(fileHash)),
    listing: (cacheId, hashPart) => findListingRow(sql, cacheId, hashPart),

    forget(cacheId, hashPart, fileHash) {
      const key = narinfoKey(cacheId, hashPart);
      hot.delete(key);
      const state = underWay.get(key);
      if (state !== undefined) {
        state.forgets += 1;
        inflight.delete(key);
      }
      if (fileHash !== undefined) hot.delete(fileKey(cacheId, fileHash));
      for (const listener of forgetListeners) listener(cacheId, hashPart, fileHash);
    },

    onForget(listener) {
      forgetListeners.add(listener);
      return () => forgetListeners.delete(listener);
    },
  };
}
