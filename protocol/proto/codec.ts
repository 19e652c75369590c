// One message per binary WebSocket frame: a MessagePack map `{v, t, …fields}`. Pure: bytes in,
// typed message or a failure naming the problem out. The schema is checked on both ends, so a
// bug on one side shows up where it is made, not as a confusing failure on the other.
import { Packr, Unpackr } from 'msgpackr';
import { describeIssue } from '../schema/index.js';
import { certainlyValid } from './fastChecks.js';
import { DEFAULT_MAX_MESSAGE_BYTES, PROTOCOL_VERSION } from './limits.js';
import { Message, MESSAGE_TYPES, type Outgoing } from './messages.js';
import type { RejectCode } from './rejectCodes.js';

// Records (msgpackr's shared structures) would make frames depend on earlier frames; plain maps do not.
const packr = new Packr({ useRecords: false, moreTypes: false });
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true });

/** Like Parsed<Message>, plus the reject code a receiver closes the connection with. */
export type DecodedMessage = { ok: true; value: Message } | { ok: false; field: string; reason: string; code: RejectCode };

export interface DecodeOptions {
  /** frames above this are refused before any decoding (default DEFAULT_MAX_MESSAGE_BYTES) */
  maxBytes?: number;
}

const failure = (code: RejectCode, field: string, reason: string): DecodedMessage => ({ ok: false, field, reason, code });

// msgpackr turns extension types into class instances (Date, its own C1Type, …); only a plain map is a message.
const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && [Object.prototype, null].includes(Object.getPrototypeOf(value));

const describe = (value: unknown): string =>
  value === null ? 'nil' : Array.isArray(value) ? 'an array' : value instanceof Uint8Array ? 'binary data' : typeof value === 'object' ? `a ${value.constructor?.name ?? 'non-map'} value` : typeof value;

/** Encodes a message; throws (a bug in the caller) when it does not match its schema. */
export function encodeMessage(message: Outgoing): Uint8Array {
  const full = { v: PROTOCOL_VERSION, ...message };
  // the hot frames skip the schema when a plain check vouches for them (fastChecks.ts)
  if (certainlyValid(message.t, full)) return packr.pack(full);
  const checked = Message.safeParse(full);
  if (!checked.success) {
    const { field, reason } = describeIssue(checked.error, '(root)');
    throw new Error(`refusing to send an invalid ${message.t} message: ${field}: ${reason}`);
  }
  return packr.pack(full);
}

/** Decodes one frame. Garbage, another version, an unknown type, a schema violation or an oversize frame each fail under their own name. */
export function decodeMessage(bytes: Uint8Array, options: DecodeOptions = {}): DecodedMessage {
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  if (bytes.length > maxBytes) return failure('message_too_large', 'frame', `the frame is ${bytes.length} bytes, over the cap of ${maxBytes}`);
  if (bytes.length === 0) return failure('malformed_message', 'frame', 'the frame is empty');
  let value: unknown;
  try {
    value = unpackr.unpack(bytes);
  } catch (e) {
    // msgpackr throws plain Errors for truncation and trailing bytes, RangeError for absurd nesting.
    const why = e instanceof RangeError ? 'nested too deeply' : e instanceof Error ? e.message : String(e);
    return failure('malformed_message', 'frame', `not a MessagePack value (${why})`);
  }
  if (!isPlainObject(value)) return failure('malformed_message', 'frame', `expected a map with "v" and "t", got ${describe(value)}`);
  if (value['v'] !== PROTOCOL_VERSION) {
    const got = typeof value['v'] === 'number' ? `version ${value['v']}` : `"v" = ${describe(value['v'])}`;
    return failure('unsupported_version', 'v', `${got} is not supported; this side speaks /proto version ${PROTOCOL_VERSION}`);
  }
  const type = value['t'];
  if (typeof type !== 'string' || !(MESSAGE_TYPES as string[]).includes(type)) {
    return failure('malformed_message', 't', `unknown message type ${typeof type === 'string' ? JSON.stringify(type.slice(0, 40)) : describe(type)}`);
  }
  // the hot frames skip the schema when a plain check vouches for them; it alone refuses (fastChecks.ts)
  if (certainlyValid(type, value)) return { ok: true, value: value as Message };
  const checked = Message.safeParse(value);
  if (!checked.success) {
    const { path, reason } = describeIssue(checked.error, type);
    return failure('malformed_message', path ? `${type}.${path}` : type, reason);
  }
  return { ok: true, value: checked.data };
}
