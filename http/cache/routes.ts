// The binary cache at the root, /cache/{cache}/… (spec: "Binary cache"): what Nix reads, and what
// `nix copy --to` writes. Credentials are HTTP Basic, checked per cache (cacheGate.ts), so the
// router's own Bearer authentication is off here. Unknown paths answer 404, always.
import { ApiError } from '../../protocol/index.js';
import type { Principal } from '../../services/index.js';
import type { Router } from '../router.js';
import type { CacheRouteServices } from './cacheDeps.js';
import { cacheInfoRoutes } from './cacheInfo.js';
import { extrasRoutes } from './extrasRoutes.js';
import { narFileRoutes } from './narFile.js';
import { narinfoRoutes } from './narinfo.js';
import { narListingRoutes } from './narListing.js';
import { nixUploadRoutes } from './nixUploads.js';
import { serveRoutes } from './serveFromNar.js';
import { upstreamNarRoutes } from './upstreamNar.js';

export function binaryCacheRoutes(root: Router<Principal>, services: CacheRouteServices): void {
  const r = root.scope('/cache/:cache', { auth: 'none', body: 'none' });
  cacheInfoRoutes(r, services);
  narinfoRoutes(r, services);
  narFileRoutes(r, services);
  narListingRoutes(r, services);
  serveRoutes(r, services);
  extrasRoutes(r, services);
  nixUploadRoutes(r, services);
  upstreamNarRoutes(r, services);
  // The cache protocol is a WebSocket (http/cacheProto/); uWS hands a plain GET of its path here.
  r.get('/proto', () => {
    throw new ApiError('websocket_required', 'this path is the cache protocol WebSocket: connect with an Upgrade: websocket request (docs/cache-protocol.md)');
  });
}
