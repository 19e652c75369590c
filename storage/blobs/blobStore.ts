// The storage seam for NARs and other immutable blobs: small on purpose, so a backend is a few
// hundred lines and every caller (ingest, the cache routes, the orphan sweeper) stays backend-blind.
// A row that points at a blob records `backend` next to the key, so a move between backends is visible.
import type { BlobRange } from './blobRange.js';

export type BlobBackend = 'fs' | 's3';

/**
 * What put() stores: a byte stream, or the path of a finished local staging file that the store
 * takes over (moved in place on the filesystem, uploaded then removed on S3). If put() fails the
 * file stays where it was and remains the caller's to remove.
 */
export type BlobSource = AsyncIterable<Uint8Array> | string;

export interface BlobRead {
  /** Size of the whole blob, for Content-Length or Content-Range's `/size`. */
  size: number;
  /** The bytes `body` carries when a range was asked, its end cut to the blob's last byte; null for the whole blob. */
  range: BlobRange | null;
  /** Read it to the end, or call cancel(): an open file or connection stays held until one happens. */
  body: AsyncIterable<Uint8Array>;
  /** Releases the file or connection behind an unread or half-read body. */
  cancel(): void;
}

export interface BlobReadOptions {
  /**
   * The caller is done with each chunk when it asks for the next one (it writes it out and keeps no
   * reference), so the store may read the next bytes into the same memory. Streaming large files
   * otherwise allocates a fresh buffer per chunk, and V8 answers that much external memory with
   * major garbage collections (measured: about 45 % of the process's CPU at 1 GB/s).
   */
  reuseChunks?: boolean;
}

export interface BlobEntry {
  key: string;
  size: number;
  modified: Date;
}

export interface BlobStore {
  readonly backend: BlobBackend;
  /**
   * Stores a blob atomically and durably: when the promise resolves the blob survives a crash, and
   * no reader ever sees part of it under `key`. Replaces an existing blob. With `size`, a source of
   * any other length fails and nothing is stored.
   */
  put(key: string, source: BlobSource, size?: number): Promise<void>;
  /** null when absent, decided before any byte; BlobRangeError when `range` starts past the end. */
  get(key: string, range?: BlobRange, options?: BlobReadOptions): Promise<BlobRead | null>;
  stat(key: string): Promise<{ size: number } | null>;
  /** Deleting an absent key succeeds. */
  delete(key: string): Promise<void>;
  /** Every stored blob whose key starts with `prefix`, never a partial write; order is unspecified. */
  list(prefix?: string): AsyncIterable<BlobEntry>;
  /** A URL a client can GET without credentials until it expires; null when the backend has none (filesystem). */
  presignedUrl(key: string, expiresSecs: number): Promise<string | null>;
  /**
   * The file that holds the blob on this machine, for a reader in another thread of this process
   * (the serving threads read NARs themselves, docs/http.md); null when the backend has none (S3).
   * Says nothing of whether the blob exists: the reader finds that out when it opens the file.
   */
  localPath(key: string): string | null;
  /**
   * Removes writes a crash abandoned, returning how many: temporary files not written to since
   * `olderThan`, multipart uploads started before it. Pick a time no live put can be that slow.
   */
  sweepPartial(olderThan: Date): Promise<number>;
  /** Releases connections; the store is unusable afterwards. */
  close(): Promise<void>;
}
