// Who gets through to a cache at the binary cache paths, as replies: public caches are open,
// private ones answer 401 with a Basic challenge without credentials (so curl and Nix send their
// netrc password) and 404 to a caller who may not see them, like a cache that does not exist.
import { isApiError } from '../../protocol/index.js';
import type { BinaryCache, BinaryCacheAccess, CacheAccess, Principal } from '../../services/index.js';
import { errorReply, isReply, type Reply } from '../reply.js';
import type { Req } from '../request.js';

export const BASIC_CHALLENGE = { 'WWW-Authenticate': 'Basic realm="kiln"' };

export const cacheNotFound = (name: string): Reply => errorReply(404, 'not_found', `no cache "${name}"`);

const challenge = (name: string): Reply =>
  errorReply(401, 'unauthorized', `cache "${name}" is private: send HTTP Basic credentials, any user name with a session token or API key as the password`, BASIC_CHALLENGE);

async function resolve(access: BinaryCacheAccess, req: Req<Principal>, name: string): Promise<CacheAccess | Reply> {
  // The common case, answered from memory without another promise per request.
  // The address matters only with credentials (allowed_ips); not asking for it saves uWS a copy.
  const authorization = req.header('authorization');
  const known = access.peek(name, authorization, authorization ? req.peerAddress : '');
  if (known !== undefined) return known;
  try {
    return await access.resolve(name, req.header('authorization'), req.peerAddress);
  } catch (e) {
    // A bad password: challenge again, so the client knows to fix its credentials.
    if (isApiError(e) && e.status === 401) return errorReply(401, e.code, e.message, BASIC_CHALLENGE);
    throw e;
  }
}

/** The cache when the caller may read it, else the reply to send. */
export async function readableCache(access: BinaryCacheAccess, req: Req<Principal>): Promise<BinaryCache | Reply> {
  const name = req.param<string>('cache');
  const decision = await resolve(access, req, name);
  return isReply(decision) ? decision : readDecision(name, decision);
}

/** readableCache's answer from memory without waiting, or undefined when only readableCache can tell. */
export function readableCacheInMemory(access: BinaryCacheAccess, req: Req<Principal>): BinaryCache | Reply | undefined {
  const name = req.param<string>('cache');
  const authorization = req.header('authorization');
  const known = access.peek(name, authorization, authorization ? req.peerAddress : '');
  return known === undefined ? undefined : readDecision(name, known);
}

function readDecision(name: string, decision: CacheAccess): BinaryCache | Reply {
  switch (decision.kind) {
    case 'visible':
      // Like GET /caches/{cache}: a key its owner's role lets see the cache still needs viewCache.
      return decision.canRead ? decision.cache : errorReply(403, 'forbidden', `viewCache is required on cache "${name}"`);
    case 'challenge':
      return challenge(name);
    case 'hidden':
      return cacheNotFound(name);
  }
}

/** The cache when the caller holds writeStore on it (`nix copy --to`), else the reply to send. */
/** A cache the request may write, with the uploader's user id: upload permits are shared fairly between owners. */
export type WritableCache = BinaryCache & { owner?: string };

export async function writableCache(access: BinaryCacheAccess, req: Req<Principal>): Promise<WritableCache | Reply> {
  const name = req.param<string>('cache');
  const decision = await resolve(access, req, name);
  if (isReply(decision)) return decision;
  switch (decision.kind) {
    case 'visible':
      if (decision.canWrite) return decision.principal.kind === 'user' ? { ...decision.cache, owner: decision.principal.userId } : decision.cache;
      if (decision.principal.kind === 'anonymous') return challenge(name);
      return errorReply(403, 'forbidden', `writeStore is required on cache "${name}" to upload`);
    case 'challenge':
      return challenge(name);
    case 'hidden':
      return cacheNotFound(name);
  }
}

export const isCache = (value: BinaryCache | Reply): value is BinaryCache => !isReply(value);
