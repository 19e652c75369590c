// nix-cache-info and pkg-cache-info (the same body): Nix asks for nix-cache-info first and
// ignores a cache without it. `WantMassQuery: 1`, not `true` (DESIGN.md, binary cache rules).
import { DEFAULT_STORE_DIR } from '../../protocol/index.js';
import type { BinaryCache, Principal } from '../../services/index.js';
import { bytesReply, type Reply } from '../reply.js';
import type { Req } from '../request.js';
import type { Router } from '../router.js';
import { CidrSet } from '../clientAddress.js';
import type { CacheRouteServices } from './cacheDeps.js';
import { readableCache } from './cacheGate.js';

/** The cache's priority for this client: local_priority inside http.localIps when it is set. */
function priorityFor(cache: BinaryCache, localIps: CidrSet, address: string): number {
  return cache.localPriority > 0 && localIps.has(address) ? cache.localPriority : cache.priority;
}

export function cacheInfoRoutes(r: Router<Principal>, services: CacheRouteServices): void {
  const localIps = new CidrSet(services.config['http.localIps']);
  const info = async (req: Req<Principal>): Promise<Reply> => {
    const cache = await readableCache(services.binaryCache, req);
    const body = `StoreDir: ${DEFAULT_STORE_DIR}\nWantMassQuery: 1\nPriority: ${priorityFor(cache, localIps, req.peerAddress)}\n`;
    return bytesReply(200, body, { 'Content-Type': 'text/x-nix-cache-info' });
  };
  r.get('/nix-cache-info', info);
  r.get('/pkg-cache-info', info);
}
