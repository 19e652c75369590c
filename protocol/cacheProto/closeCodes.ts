// Why the server ends a cache protocol connection: the close frame's code and `<name>: <reason>`.
// The refusals of the cache itself are 4000 + the HTTP status the binary cache paths answer, as on
// the live sockets (http/live/eventSockets.ts).

export const CACHE_CLOSE_CODES = {
  /** a frame that is not a message: text, not MessagePack, an unknown type, a schema violation */
  malformed_message: 4002,
  /** `v` is not CACHE_PROTO_VERSION */
  unsupported_version: 4001,
  /** a frame over MAX_CLIENT_FRAME_BYTES */
  message_too_large: 1009,
  /** bad credentials, or none where a key is needed */
  unauthorized: 4401,
  /** the credentials see the cache but may not read it (viewCache) */
  forbidden: 4403,
  /** no such cache, or one these credentials may not see */
  not_found: 4404,
  /** the client address holds proto.anonymousCache.maxConnectionsPerIp anonymous connections */
  too_many_connections: 4429,
  /** the server is stopping */
  shutting_down: 1001,
  /** an unexpected fault on the server */
  internal_error: 1011,
} as const;

export type CacheCloseCode = keyof typeof CACHE_CLOSE_CODES;

/** The close frame: `<name>: <reason>`, cut to the 123 bytes a close reason may have. */
export function cacheCloseFrame(code: CacheCloseCode, reason: string): { closeCode: number; closeReason: string } {
  let text = `${code}: ${reason}`;
  while (Buffer.byteLength(text) > 123) text = text.slice(0, -1);
  return { closeCode: CACHE_CLOSE_CODES[code], closeReason: text };
}
