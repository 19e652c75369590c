// Pushing a NAR from the worker to the server, with credit-based flow control:
//   worker: narPushStart ─▶            server: narCredit {chunks: n} (or narPushAck present, or narAbort)
//   worker: narChunk × ≤ credit ─▶     server: more narCredit as it stores what arrived
//   worker: narPushEnd ─▶              server: narPushAck stored (after verifying NarHash/NarSize) or narAbort
// A worker sends a chunk only while it holds credit; a chunk that waits longer than
// narSendChunkTimeoutSecs (for credit or for the socket to drain) ends the transfer with narAbort.
import { z } from 'zod';
import { MAX_NAR_CHUNK_BYTES, PROTOCOL_VERSION } from './limits.js';
import { ByteCount, Bytes, JobId, NarHashText } from './fields.js';
import { PathInfo } from './jobMessages.js';

const v = z.literal(PROTOCOL_VERSION);
/** Chosen by the worker, unique among its open transfers on one connection. */
const TransferId = z.int().min(0).max(0xffff_ffff);
const CacheName = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/, 'a cache name');

export const NarPushStart = z.strictObject({
  v,
  t: z.literal('narPushStart'),
  transferId: TransferId,
  jobId: JobId,
  info: PathInfo,
  targetCaches: z.array(CacheName).min(1).max(64),
});
export type NarPushStart = z.infer<typeof NarPushStart>;

/** Server → worker: permission to send `chunks` more chunks (added to any credit left). */
export const NarCredit = z.strictObject({ v, t: z.literal('narCredit'), transferId: TransferId, chunks: z.int().min(1).max(1024) });
export type NarCredit = z.infer<typeof NarCredit>;

export const NarChunk = z.strictObject({
  v,
  t: z.literal('narChunk'),
  transferId: TransferId,
  /** 0, 1, 2, …: the receiver refuses a gap */
  seq: z.int().min(0),
  data: Bytes.refine((b) => b.length > 0 && b.length <= MAX_NAR_CHUNK_BYTES, { message: `a chunk holds 1 to ${MAX_NAR_CHUNK_BYTES} bytes` }),
});
export type NarChunk = z.infer<typeof NarChunk>;

export const NarPushEnd = z.strictObject({
  v,
  t: z.literal('narPushEnd'),
  transferId: TransferId,
  chunks: z.int().min(0),
  /** what the worker hashed while sending; must equal the announced info */
  narHash: NarHashText,
  narSize: ByteCount,
});
export type NarPushEnd = z.infer<typeof NarPushEnd>;

/** Server → worker: `present`: every target cache already has the path (may come instead of credit); `stored`: verified and stored. */
export const NarPushAck = z.strictObject({ v, t: z.literal('narPushAck'), transferId: TransferId, status: z.enum(['stored', 'present']) });
export type NarPushAck = z.infer<typeof NarPushAck>;

export const NarAbortCode = z.enum(['timeout', 'verify_failed', 'rejected', 'cancelled', 'io_error', 'too_large', 'protocol']);
export type NarAbortCode = z.infer<typeof NarAbortCode>;

/** Either side: the transfer is over and nothing of it is kept. */
export const NarAbort = z.strictObject({ v, t: z.literal('narAbort'), transferId: TransferId, code: NarAbortCode, reason: z.string().max(4096) });
export type NarAbort = z.infer<typeof NarAbort>;
