// The binary cache at the root, /cache/{cache}/… (spec: "Binary cache"): what Nix reads, and what
// `nix copy --to` writes. Credentials are HTTP Basic, checked per cache (cacheGate.ts), so the
// router's own Bearer authentication is off here. Unknown paths answer 404, always.
import type { Principal } from '../../services/index.js';
import type { Router } from '../router.js';
import type { CacheRouteDeps } from './cacheDeps.js';
import { cacheInfoRoutes } from './cacheInfo.js';
import { extrasRoutes } from './extrasRoutes.js';
import { narFileRoutes } from './narFile.js';
import { narinfoRoutes } from './narinfo.js';
import { narListingRoutes } from './narListing.js';
import { nixUploadRoutes } from './nixUploads.js';
import { serveRoutes } from './serveFromNar.js';
import { upstreamNarRoutes } from './upstreamNar.js';

export type { CacheRouteDeps } from './cacheDeps.js';
export { noCacheExtras, type CacheExtras } from './extras.js';
export { upstreamExtras } from './upstreamExtras.js';

export function binaryCacheRoutes(root: Router<Principal>, deps: CacheRouteDeps): void {
  const r = root.scope('/cache/:cache', { auth: 'none', body: 'none' });
  cacheInfoRoutes(r, deps);
  narinfoRoutes(r, deps);
  narFileRoutes(r, deps);
  narListingRoutes(r, deps);
  serveRoutes(r, deps);
  extrasRoutes(r, deps);
  nixUploadRoutes(r, deps);
  if (deps.upstreams) upstreamNarRoutes(r, { access: deps.access, upstreams: deps.upstreams });
}
