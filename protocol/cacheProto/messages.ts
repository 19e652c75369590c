// The cache protocol's messages (docs/cache-protocol.md): GET /cache/{cache}/proto, a WebSocket for
// programs that look up many store paths at once. Same framing as /proto (one MessagePack map
// `{v, t, …}` per binary frame), its own version and message set: a cache client is not a worker.
import { z } from 'zod';

/** The cache protocol's version; independent of /proto's PROTOCOL_VERSION. */
export const CACHE_PROTO_VERSION = 1;
/** Hash parts one query may name: an answer stays a few MiB at most. */
export const MAX_QUERY_HASHES = 500;
/** Queries and NAR downloads one connection may have unanswered at once. */
export const MAX_IN_FLIGHT = 16;
/** The largest client frame the server reads (a query of MAX_QUERY_HASHES hashes is about 17 KiB). */
export const MAX_CLIENT_FRAME_BYTES = 64 * 1024;
/** The largest `narChunk` data the server sends. */
export const CACHE_NAR_CHUNK_BYTES = 256 * 1024;

const v = z.literal(CACHE_PROTO_VERSION);
/** Chosen by the client; names the answer. Reusing an id still in flight is refused. */
const RequestId = z.int().min(0).max(0xffff_ffff);
const HashPart = z.string().regex(/^[0-9a-df-np-sv-z]{32}$/, 'a store path hash part: 32 nix32 characters');

// client → server
export const CacheQuery = z.strictObject({ v, t: z.literal('query'), id: RequestId, hashes: z.array(HashPart).min(1).max(MAX_QUERY_HASHES) });
export const CacheNarRequest = z.strictObject({ v, t: z.literal('nar'), id: RequestId, hash: HashPart });
/** Stops a NAR download; the server answers `end` if it was still running, nothing otherwise. */
export const CacheCancel = z.strictObject({ v, t: z.literal('cancel'), id: RequestId });
export const CacheClientMessage = z.discriminatedUnion('t', [CacheQuery, CacheNarRequest, CacheCancel]);
export type CacheClientMessage = z.infer<typeof CacheClientMessage>;
export const CACHE_CLIENT_TYPES = ['query', 'nar', 'cancel'] as const;

// server → client
export const CacheReady = z.strictObject({
  v, t: z.literal('ready'),
  cache: z.string(),
  /** `<key name>:<base64>`: what verifies the narinfos' signatures */
  publicKey: z.string(),
  limits: z.strictObject({ maxQueryHashes: z.int(), maxInFlight: z.int(), maxFrameBytes: z.int(), narChunkBytes: z.int() }),
});
export const CachePaths = z.strictObject({
  v, t: z.literal('paths'), id: RequestId,
  /** each narinfo byte for byte as GET /cache/{cache}/{hash}.narinfo answers it */
  found: z.array(z.strictObject({ hash: HashPart, narinfo: z.string() })),
  missing: z.array(HashPart),
});
export const CacheNarStart = z.strictObject({
  v, t: z.literal('narStart'), id: RequestId, hash: HashPart,
  /** the narinfo's URL, relative to the cache: what GET would have fetched */
  url: z.string(),
  /** bytes that follow in narChunk frames (the stored file, compressed as the narinfo says) */
  size: z.int().min(0),
});
export const CacheNarChunk = z.strictObject({ v, t: z.literal('narChunk'), id: RequestId, data: z.custom<Uint8Array>((value) => value instanceof Uint8Array, 'bytes') });
export const CacheEnd = z.strictObject({ v, t: z.literal('end'), id: RequestId });
export const CacheRequestError = z.strictObject({
  v, t: z.literal('error'), id: RequestId,
  code: z.enum(['not_found', 'storage_busy', 'too_slow', 'too_many_requests', 'duplicate_id', 'internal']),
  message: z.string(),
});
export const CacheServerMessage = z.discriminatedUnion('t', [CacheReady, CachePaths, CacheNarStart, CacheNarChunk, CacheEnd, CacheRequestError]);
export type CacheServerMessage = z.infer<typeof CacheServerMessage>;
/** What the server passes to the encoder: `v` is added there. */
export type CacheOutgoing = CacheServerMessage extends infer M ? (M extends { v: number } ? Omit<M, 'v'> : never) : never;
