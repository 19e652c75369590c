// Who gets through to a cache at the binary cache paths: public caches are open,
// private ones answer 401 with a Basic challenge without credentials (so curl and Nix send their
// netrc password) and 404 to a caller who may not see them, like a cache that does not exist.
import { ApiError, isApiError } from '../../protocol/index.js';
import type { BinaryCache, BinaryCacheAccess, CacheAccess, Principal } from '../../services/index.js';
import type { Req } from '../request.js';

export const BASIC_CHALLENGE = { 'WWW-Authenticate': 'Basic realm="kiln"' };

export const cacheNotFound = (name: string): ApiError => new ApiError('not_found', `no cache "${name}"`);

const challenge = (name: string): ApiError =>
  new ApiError('unauthorized', `cache "${name}" is private: send HTTP Basic credentials, any user name with a session token or API key as the password`, { headers: BASIC_CHALLENGE });

async function resolve(access: BinaryCacheAccess, req: Req<Principal>, name: string): Promise<CacheAccess> {
  // The common case, answered from memory without another promise per request.
  // The address matters only with credentials (allowed_ips); not asking for it saves uWS a copy.
  const authorization = req.header('authorization');
  const known = access.peek(name, authorization, authorization ? req.peerAddress : '');
  if (known !== undefined) return known;
  try {
    return await access.resolve(name, req.header('authorization'), req.peerAddress);
  } catch (e) {
    // A bad password: challenge again, so the client knows to fix its credentials.
    throw isApiError(e) && e.status === 401 ? e.withHeaders(BASIC_CHALLENGE) : e;
  }
}

/** The cache when the caller may read it; throws the refusal otherwise. */
export async function readableCache(access: BinaryCacheAccess, req: Req<Principal>): Promise<BinaryCache> {
  const name = req.param<string>('cache');
  return readDecision(name, await resolve(access, req, name));
}

/** readableCache with the caller the credentials name (what the cache's content may depend on, as a build log's). */
export async function readableCacheAs(access: BinaryCacheAccess, req: Req<Principal>): Promise<{ cache: BinaryCache; principal: Principal }> {
  const name = req.param<string>('cache');
  const decision = await resolve(access, req, name);
  const cache = readDecision(name, decision);
  return { cache, principal: decision.kind === 'visible' ? decision.principal : req.principal };
}

/** readableCache's answer from memory without waiting, or undefined when only readableCache can tell. */
export function readableCacheInMemory(access: BinaryCacheAccess, req: Req<Principal>): BinaryCache | undefined {
  const name = req.param<string>('cache');
  const authorization = req.header('authorization');
  const known = access.peek(name, authorization, authorization ? req.peerAddress : '');
  return known === undefined ? undefined : readDecision(name, known);
}

/**
 * The cache `name` when a request without credentials may read it, or null when such a request is
 * refused (a serving thread then hands it to the main thread, whose route words the refusal).
 * The decision readableCache takes for that request, from the same memo.
 */
export async function anonymousReadableCache(access: BinaryCacheAccess, name: string): Promise<BinaryCache | null> {
  // Anonymous answers do not depend on the address (binaryCacheAccess.ts).
  const decision = access.peek(name, undefined, '') ?? (await access.resolve(name, undefined, ''));
  try {
    return readDecision(name, decision);
  } catch (e) {
    if (isApiError(e)) return null;
    throw e;
  }
}

function readDecision(name: string, decision: CacheAccess): BinaryCache {
  switch (decision.kind) {
    case 'visible':
      // Like GET /caches/{cache}: a key its owner's role lets see the cache still needs viewCache.
      if (decision.canRead) return decision.cache;
      throw new ApiError('forbidden', `viewCache is required on cache "${name}"`);
    case 'challenge':
      throw challenge(name);
    case 'hidden':
      throw cacheNotFound(name);
  }
}

/** A cache the request may write, with the uploader's user id: upload permits are shared fairly between owners. */
export type WritableCache = BinaryCache & { owner?: string };

/** The cache when the caller holds writeStore on it (`nix copy --to`); throws the refusal otherwise. */
export async function writableCache(access: BinaryCacheAccess, req: Req<Principal>): Promise<WritableCache> {
  const name = req.param<string>('cache');
  const decision = await resolve(access, req, name);
  switch (decision.kind) {
    case 'visible':
      if (decision.canWrite) return decision.principal.kind === 'user' ? { ...decision.cache, owner: decision.principal.userId } : decision.cache;
      if (decision.principal.kind === 'anonymous') throw challenge(name);
      throw new ApiError('forbidden', `writeStore is required on cache "${name}" to upload`);
    case 'challenge':
      throw challenge(name);
    case 'hidden':
      throw cacheNotFound(name);
  }
}
