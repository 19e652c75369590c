// GET {hash}.narinfo: the signed narinfo, from the hot cache when this process has seen it.
import { ApiError, isStorePathHashPart } from '../../protocol/index.js';
import type { BinaryCache, Principal } from '../../services/index.js';
import { bytesReply, type Reply } from '../reply.js';
import type { Req } from '../request.js';
import type { Router } from '../router.js';
import type { CacheRouteServices } from './cacheDeps.js';
import { anonymousReadableCache, readableCache, readableCacheInMemory } from './cacheGate.js';

const textEncoder = new TextEncoder();
const JSON_HEADERS = { 'Content-Type': 'application/json' };
const NARINFO_HEADERS = { 'Content-Type': 'text/x-nix-narinfo', 'X-Cache': 'HIT' };
/** from an upstream cache (services/caches/upstreams.ts) */
const UPSTREAM_NARINFO_HEADERS = { 'Content-Type': 'text/x-nix-narinfo', 'X-Cache': 'MISS' };

/** The route's answers: a narinfo found (200) and a miss (404), counted as traffic unless `counted` is false. */
function narinfoReplies(services: CacheRouteServices, counted = true) {
  const missPrefixes = new Map<string, string>();
  const notFound = (cache: BinaryCache, hash: string): Reply => {
    if (!isStorePathHashPart(hash)) throw new ApiError('not_found', `cache "${cache.name}" has no path ${hash}`);
    if (counted) services.caches.traffic.served(cache, hash, false);
    // The envelope http/server.ts would make of that ApiError, as text (a valid hash needs no
    // escaping): on a busy cache a miss is as common as a hit.
    let prefix = missPrefixes.get(cache.name);
    if (prefix === undefined) {
      prefix = `{"error":true,"message":${JSON.stringify(`cache "${cache.name}" has no path `).slice(0, -1)}`;
      if (missPrefixes.size > 10_000) missPrefixes.clear();
      missPrefixes.set(cache.name, prefix);
    }
    return bytesReply(404, `${prefix}${hash}","code":"not_found"}`, JSON_HEADERS);
  };
  const found = (cache: BinaryCache, hash: string, text: Uint8Array, headers: Record<string, string>) => {
    if (counted) services.caches.traffic.served(cache, hash, true, headers === UPSTREAM_NARINFO_HEADERS);
    return bytesReply(200, text, headers);
  };
  return { notFound, found };
}

/** What a serving thread may keep in memory of an anonymous GET of a narinfo (http/serving/threadHotCache.ts). */
export interface KeepableNarinfo {
  status: 200 | 404;
  contentType: string;
  /** 'HIT' for a narinfo of the cache, null for a miss */
  xCache: string | null;
  body: Uint8Array;
}

/** A serving thread's renewal of an entry: the answer it may keep, 'miss' when it is still the miss the thread holds, null when it may keep none. */
export type NarinfoRenewal = KeepableNarinfo | 'miss' | null;

/**
 * The route's answer to GET /cache/{name}/{hash}.narinfo without credentials, when a serving
 * thread may keep it: a narinfo of the cache or a miss, decided as the route does (a serving
 * thread's refresh, http/serving/narinfoRefreshes.ts); null for anything else (a refusal, an
 * upstream's narinfo). A miss the thread says it holds (`heldMiss`) is answered 'miss': the thread
 * keeps the body it has, and neither side makes or copies one (most refreshes are of misses: they
 * live 5 s, hits 60 s). Not counted as traffic: a refresh is asked while the thread answers the
 * request from memory, and the thread counts that answer (threadAnswers.ts).
 */
export function anonymousNarinfo(services: CacheRouteServices): (name: string, hash: string, heldMiss: boolean) => Promise<NarinfoRenewal> {
  const { notFound, found } = narinfoReplies(services, false);
  const keepable = (reply: Reply): KeepableNarinfo | null => {
    if (reply.kind !== 'bytes' || (reply.status !== 200 && reply.status !== 404)) return null;
    // A copy of exactly the body: the message to the thread clones a view's whole backing store
    // (Node's 8 KiB pool for a short text), which the thread would then keep (threadHotCache.ts).
    const body = typeof reply.body === 'string' ? textEncoder.encode(reply.body) : new Uint8Array(reply.body);
    return { status: reply.status, contentType: reply.headers['Content-Type'] ?? '', xCache: reply.status === 200 ? 'HIT' : null, body };
  };
  return async (name, hash, heldMiss) => {
    if (!isStorePathHashPart(hash)) return null;
    const cache = await anonymousReadableCache(services.binaryCache, name);
    if (cache === null) return null;
    const text = await services.nars.reads.narinfo(cache.id, hash);
    if (text !== null) return keepable(found(cache, hash, text, NARINFO_HEADERS));
    if ((await services.caches.upstreams.lookupUpstreamNarinfo(cache, hash)) !== null) return null;
    return heldMiss ? 'miss' : keepable(notFound(cache, hash));
  };
}

export function narinfoRoutes(r: Router<Principal>, services: CacheRouteServices): void {
  const { notFound, found } = narinfoReplies(services);

  /** The answer this process knows without waiting: a cached narinfo, a known miss; undefined when only a lookup can tell. */
  const fromMemory = (cache: BinaryCache, hash: string): Reply | undefined => {
    if (!isStorePathHashPart(hash)) return undefined; // rare: the lookup refuses it
    const text = services.nars.reads.narinfoInMemory(cache.id, hash);
    if (text) return found(cache, hash, text, NARINFO_HEADERS);
    if (text === null && services.caches.upstreams.knownToHaveNone(cache.id)) return notFound(cache, hash);
    return undefined;
  };

  // Hits and misses this process already knows are answered without a single await: on a busy
  // cache they are nearly every request, and each await is a turn of the microtask queue.
  const inMemory = (req: Req<Principal>): Reply | undefined => {
    const cache = readableCacheInMemory(services.binaryCache, req);
    if (cache === undefined) return undefined;
    return fromMemory(cache, req.param<string>('hash'));
  };

  // Anonymous GETs of a readable cache go first through a lane (router.ts), straight from uWS's
  // router; anything else it leaves to the route below, which answers the same.
  r.lane('/:file', ([name = '', file = ''], header) => {
    if (!file.endsWith('.narinfo') || header('authorization') !== '' || name.includes('%') || file.includes('%')) return undefined;
    const decision = services.binaryCache.peek(name, undefined, '');
    if (decision?.kind !== 'visible' || !decision.canRead) return undefined;
    return fromMemory(decision.cache, file.slice(0, -'.narinfo'.length));
  });

  r.get('/:hash.narinfo', (req) => inMemory(req) ?? lookup(req));

  async function lookup(req: Req<Principal>): Promise<Reply> {
    const cache = await readableCache(services.binaryCache, req);
    const hash = req.param<string>('hash');
    const known = await findNarinfo(services, cache, hash);
    return known === null ? notFound(cache, hash) : found(cache, hash, known.text, known.upstream ? UPSTREAM_NARINFO_HEADERS : NARINFO_HEADERS);
  }
}

/**
 * The narinfo GET {hash}.narinfo answers for a cache the caller may read: the cache's own, else
 * the first upstream's that verifies (services/caches/upstreams.ts), else null. Not counted as
 * traffic: the caller counts its answer (the route above, the cache protocol's query).
 */
export async function findNarinfo(services: CacheRouteServices, cache: BinaryCache, hash: string): Promise<{ text: Buffer; upstream: boolean } | null> {
  if (!isStorePathHashPart(hash)) return null;
  const text = await services.nars.reads.narinfo(cache.id, hash);
  if (text !== null) return { text, upstream: false };
  const upstream = await services.caches.upstreams.lookupUpstreamNarinfo(cache, hash);
  return upstream === null ? null : { text: upstream, upstream: true };
}
