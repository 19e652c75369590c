// nix-cache-info and pkg-cache-info (the same body): Nix asks for nix-cache-info first and
// ignores a cache without it. `WantMassQuery: 1`, not `true` (DESIGN.md, binary cache rules).
import { DEFAULT_STORE_DIR } from '../../protocol/index.js';
import type { BinaryCache, Principal } from '../../services/index.js';
import { bytesReply, type Reply } from '../reply.js';
import type { Req } from '../request.js';
import type { Router } from '../router.js';
import type { CacheRouteDeps } from './cacheDeps.js';
import { readableCache } from './cacheGate.js';

/** The cache's priority for this client: local_priority inside http.localIps when it is set. */
export function priorityFor(cache: BinaryCache, deps: Pick<CacheRouteDeps, 'localIps'>, address: string): number {
  return cache.localPriority > 0 && deps.localIps.has(address) ? cache.localPriority : cache.priority;
}

export function cacheInfoRoutes(r: Router<Principal>, deps: CacheRouteDeps): void {
  const info = async (req: Req<Principal>): Promise<Reply> => {
    const cache = await readableCache(deps.access, req);
    const body = `StoreDir: ${DEFAULT_STORE_DIR}\nWantMassQuery: 1\nPriority: ${priorityFor(cache, deps, req.peerAddress)}\n`;
    return bytesReply(200, body, { 'Content-Type': 'text/x-nix-cache-info' });
  };
  r.get('/nix-cache-info', info);
  r.get('/pkg-cache-info', info);
}
