// Managing a cache's upstream caches (/caches/{cache}/upstreams): anyone who may see the cache
// lists them; manageCache adds, changes and removes. The lookups themselves are upstreams.ts.
import { ApiError, VerifyingKey, type UpstreamBody } from '../../protocol/index.js';
import type { OutboundClient } from '../../storage/index.js';
import type { CacheDeps } from './cacheDeps.js';
import { cachesService } from './caches.js';
import { demandAllowedDestination } from '../access/index.js';
import type { Principal } from '../access/index.js';
import { isUuid } from '../access/index.js';
import { openUpstreamCredentials, sealUpstreamCredentials, upstreamAuthOf, type UpstreamAuth } from './upstreamCredentials.js';
import { deleteUpstreamRow, listUpstreamRows, upsertUpstreamRow, type UpstreamRow } from './upstreamRows.js';

export interface UpstreamView {
  id: string;
  url: string;
  public_key: string;
  priority: number;
  /** how kiln authenticates to it (basic or bearer), null for none; the credentials themselves are never shown */
  auth: UpstreamAuth;
  created_at: Date;
}

const toView = (row: UpstreamRow, auth: UpstreamAuth): UpstreamView => ({
  id: row.id, url: row.url, public_key: row.public_key, priority: row.priority, auth, created_at: row.created_at,
});

/** The URL as stored: no trailing slash, so `<url>/<hash>.narinfo` is always one slash. */
export const normalizeUpstreamUrl = (url: string): string => url.replace(/\/+$/, '');

export interface CacheUpstreamsDeps extends CacheDeps {
  /** where upstreams may be (outbound.allowedNetworks) */
  outbound: Pick<OutboundClient, 'refusalOf'>;
}

export function cacheUpstreamsService(deps: CacheUpstreamsDeps) {
  const { sql } = deps;
  const caches = cachesService(deps);
  const viewsOf = async (cacheId: string): Promise<UpstreamView[]> =>
    (await listUpstreamRows(sql, cacheId)).map((row) =>
      toView(row, row.credentials === null ? null : upstreamAuthOf(openUpstreamCredentials(deps.secretBox, row.credentials))));
  // Every process's memo of the cache's upstreams and of their answers hears of it (upstreams.ts).
  const changed = (row: { id: string; name: string }, reason: 'upstream.put' | 'upstream.delete') =>
    deps.events.publish('cache.changed', { cache: row.name, reason }, { cacheId: row.id });
  return {
    async list(who: Principal, cache: string): Promise<UpstreamView[]> {
      const { row } = await caches.demandRecord(who, cache, 'viewCache');
      return viewsOf(row.id);
    },

    /** Adds the upstream, or updates the one with the same URL; the cache's upstreams afterwards. */
    async put(who: Principal, cache: string, body: UpstreamBody): Promise<UpstreamView[]> {
      const { row } = await caches.demandRecord(who, cache, 'manageCache');
      const key = VerifyingKey.parse(body.public_key);
      if (!key.ok) throw new ApiError('invalid_body', `public_key: ${key.reason}`);
      const url = normalizeUpstreamUrl(body.url);
      if (url === normalizeUpstreamUrl(`${deps.config['serveUrl']}/cache/${row.name}`)) {
        throw new ApiError('invalid_body', `url: ${url} is cache "${row.name}" itself`);
      }
      await demandAllowedDestination(deps.outbound, 'url', url);
      await upsertUpstreamRow(sql, row.id, {
        url, public_key: key.value.toString(), priority: body.priority,
        ...(body.credentials === undefined ? {} : { credentials: body.credentials === null ? null : sealUpstreamCredentials(deps.secretBox, body.credentials) }),
      });
      changed(row, 'upstream.put');
      return viewsOf(row.id);
    },

    async remove(who: Principal, cache: string, id: string): Promise<UpstreamView[]> {
      const { row } = await caches.demandRecord(who, cache, 'manageCache');
      if (!isUuid(id) || !(await deleteUpstreamRow(sql, row.id, id))) {
        throw new ApiError('upstream_not_found', `cache "${row.name}" has no upstream ${id}`);
      }
      changed(row, 'upstream.delete');
      return viewsOf(row.id);
    },
  };
}
export type CacheUpstreamsService = ReturnType<typeof cacheUpstreamsService>;
