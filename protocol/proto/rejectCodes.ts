// Why a /proto connection ends. Each code travels twice: in a `reject` message (when the peer can
// still read one) and in the WebSocket close frame, whose reason survives any protocol version.
// docs/proto.md lists them; test/protocol/proto/docs.test.ts keeps the two in step.

export const REJECT_CODES = {
  /** the peer speaks another protocol version */
  unsupported_version: 4001,
  /** a frame that is not a valid message: not MessagePack, a text frame, a schema violation */
  malformed_message: 4002,
  /** a frame larger than the cap in force */
  message_too_large: 1009,
  /** a valid message in the wrong phase or direction */
  unexpected_message: 4004,
  /** the handshake did not finish in time */
  handshake_timeout: 4008,
  /** tokens were presented and none verified */
  bad_token: 4010,
  /** no token for any challenged project, and open mode does not apply */
  no_token: 4011,
  /** proto.discoverable is off: this server only dials its workers */
  not_discoverable: 4003,
  /** the worker has no peers file, and the server does not accept open-mode workers */
  open_mode_refused: 4012,
  /** the `auth` answers another challenge */
  bad_nonce: 4013,
  /** a worker with this id is already connected */
  duplicate_worker: 4014,
  /** the peer was silent longer than the heartbeat timeout */
  heartbeat_timeout: 4016,
  /** proto.maxConnections connections are open */
  server_full: 1013,
  /** the peer is stopping */
  shutting_down: 1001,
  /** an unexpected fault on the closing side */
  internal_error: 1011,
} as const;

export type RejectCode = keyof typeof REJECT_CODES;
export const rejectCodeNames = Object.keys(REJECT_CODES) as RejectCode[];

export const isRejectCode = (text: string): text is RejectCode => Object.hasOwn(REJECT_CODES, text);

/** WebSocket close reasons are at most 123 bytes of UTF-8. */
const CLOSE_REASON_MAX_BYTES = 123;

/** The close frame for `code`: `<code>: <reason>`, cut to fit. */
export function closeFrameFor(code: RejectCode, reason: string): { closeCode: number; closeReason: string } {
  let text = `${code}: ${reason}`;
  while (Buffer.byteLength(text) > CLOSE_REASON_MAX_BYTES) text = text.slice(0, -1);
  return { closeCode: REJECT_CODES[code], closeReason: text };
}

/** Reads a close frame back: the code name when the reason starts with one. */
export function rejectCodeOfClose(closeReason: string): RejectCode | undefined {
  const name = /^([a-z_]+):/.exec(closeReason)?.[1];
  return name !== undefined && isRejectCode(name) ? name : undefined;
}
