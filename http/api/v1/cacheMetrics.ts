// The stored cache traffic (docs/metrics.md, "Stored metrics"): GET /caches/{cache}/metrics (a
// cache's series, viewCache) and GET /board/cache (the cache board: every cache the caller may see).
import { CacheMetricsQuery, CacheName } from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import type { Router } from '../../router.js';

export function cacheMetricsRoutes(r: Router<Principal>, { cacheMetrics }: Pick<Services, 'cacheMetrics'>): void {
  r.get('/caches/:cache/metrics', (req) => cacheMetrics.series(req.principal, req.param('cache', CacheName), req.query(CacheMetricsQuery)));
  r.get('/board/cache', (req) => cacheMetrics.board(req.principal));
}
