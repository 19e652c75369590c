// One path as a cache holds it: the shared cached_paths row and this cache's signature row. The
// NAR management API (services/caches/cacheNars.ts) lists and shows these.
export interface CachePathRow {
  hashPart: string;
  storePath: string;
  narHash: string;
  narSize: number;
  fileHash: string;
  fileSize: number;
  references: string[];
  deriver: string | null;
  ca: string | null;
  signature: string;
  /** when the path entered this cache */
  createdAt: Date;
  lastFetchedAt: Date | null;
}

export interface RawCachePathRow {
  hash_part: string;
  store_path: string;
  nar_hash: string;
  nar_size: string;
  file_hash: string;
  file_size: string;
  refs: string[];
  deriver: string | null;
  ca: string | null;
  signature: string;
  created_at: Date;
  last_fetched_at: Date | null;
}

export const toCachePathRow = (r: RawCachePathRow): CachePathRow => ({
  hashPart: r.hash_part,
  storePath: r.store_path,
  narHash: r.nar_hash,
  narSize: Number(r.nar_size),
  fileHash: r.file_hash,
  fileSize: Number(r.file_size),
  references: r.refs,
  deriver: r.deriver,
  ca: r.ca,
  signature: r.signature,
  createdAt: r.created_at,
  lastFetchedAt: r.last_fetched_at,
});
