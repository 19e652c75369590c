// The cache protocol's frames: a MessagePack map per binary frame, as /proto's (docs/proto.md,
// "Encoding"): plain maps, no records, so a frame never depends on an earlier one.
import { Packr, Unpackr } from 'msgpackr';
import { describeIssue } from '../schema/index.js';
import type { CacheCloseCode } from './closeCodes.js';
import { CACHE_CLIENT_TYPES, CACHE_PROTO_VERSION, CacheClientMessage, CacheServerMessage, MAX_CLIENT_FRAME_BYTES, type CacheOutgoing } from './messages.js';

const packr = new Packr({ useRecords: false, moreTypes: false });
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true });

export type DecodedCacheMessage = { ok: true; value: CacheClientMessage } | { ok: false; code: CacheCloseCode; reason: string };

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && [Object.prototype, null].includes(Object.getPrototypeOf(value));

/** Encodes a server message; throws (a bug of the caller) when it does not match its schema. */
export function encodeCacheMessage(message: CacheOutgoing): Uint8Array {
  const full = { v: CACHE_PROTO_VERSION, ...message };
  // A NAR chunk is checked by hand: its schema would cost more than the chunk's copy.
  if (full.t !== 'narChunk') {
    const checked = CacheServerMessage.safeParse(full);
    if (!checked.success) {
      const { field, reason } = describeIssue(checked.error, '(root)');
      throw new Error(`refusing to send an invalid ${message.t} message: ${field}: ${reason}`);
    }
  }
  return packr.pack(full);
}

/** Decodes a server frame (clients and tests); throws on anything that is not one. */
export function decodeCacheServerMessage(bytes: Uint8Array): CacheServerMessage {
  return CacheServerMessage.parse(unpackr.unpack(bytes));
}

/** Encodes a client message (clients and tests). */
export function encodeCacheClientMessage(message: CacheClientMessage): Uint8Array {
  return packr.pack(CacheClientMessage.parse(message));
}

/** Decodes a client frame: the message, or the close code and a reason naming the problem. */
export function decodeCacheClientMessage(bytes: Uint8Array): DecodedCacheMessage {
  if (bytes.length > MAX_CLIENT_FRAME_BYTES) return { ok: false, code: 'message_too_large', reason: `the frame is ${bytes.length} bytes, over the cap of ${MAX_CLIENT_FRAME_BYTES}` };
  if (bytes.length === 0) return { ok: false, code: 'malformed_message', reason: 'the frame is empty' };
  let value: unknown;
  try {
    value = unpackr.unpack(bytes);
  } catch (e) {
    const why = e instanceof RangeError ? 'nested too deeply' : e instanceof Error ? e.message : String(e);
    return { ok: false, code: 'malformed_message', reason: `not a MessagePack value (${why})` };
  }
  if (!isPlainObject(value)) return { ok: false, code: 'malformed_message', reason: 'expected a map with "v" and "t"' };
  if (value['v'] !== CACHE_PROTO_VERSION) {
    return { ok: false, code: 'unsupported_version', reason: `"v" must be ${CACHE_PROTO_VERSION}, the cache protocol version this server speaks` };
  }
  const type = value['t'];
  if (typeof type !== 'string' || !(CACHE_CLIENT_TYPES as readonly string[]).includes(type)) {
    return { ok: false, code: 'malformed_message', reason: `unknown message type ${typeof type === 'string' ? JSON.stringify(type.slice(0, 40)) : typeof type}` };
  }
  const checked = CacheClientMessage.safeParse(value);
  if (!checked.success) {
    const { field, reason } = describeIssue(checked.error, type);
    return { ok: false, code: 'malformed_message', reason: `${field === type ? type : `${type}.${field}`}: ${reason}` };
  }
  return { ok: true, value: checked.data };
}
