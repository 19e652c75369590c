// The cache protocol of GET /cache/{cache}/proto: messages, limits, codec, close codes (docs/cache-protocol.md).
export {
  CACHE_PROTO_VERSION, MAX_QUERY_HASHES, MAX_IN_FLIGHT, MAX_CLIENT_FRAME_BYTES, CACHE_NAR_CHUNK_BYTES,
  type CacheClientMessage, type CacheServerMessage, type CacheOutgoing,
} from './messages.js';
export { CACHE_CLOSE_CODES, type CacheCloseCode, cacheCloseFrame } from './closeCodes.js';
export { encodeCacheMessage, decodeCacheClientMessage, decodeCacheServerMessage, encodeCacheClientMessage } from './codec.js';
