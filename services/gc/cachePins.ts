// Pins (kiln extension, docs/gc.md "Pins"): PUT/DELETE /caches/{cache}/pins/{hash}, GET
// /caches/{cache}/pins (a page at a time). Pinning or unpinning needs writeStore on the cache (whoever may put paths
// in may keep them); listing needs viewCache. A new pin's closure is protected at once, not only
// from the next pass.
import type { Sql } from 'postgres';
import { ApiError, type PinBody, type PinListQuery, type PinPage, type PinView } from '../../protocol/index.js';
import { addPinnedClosures, countCachePins, deleteCachePin, findCachePath, listCachePins, upsertCachePin, type CachePinRow } from '../../storage/index.js';
import type { Clock } from '../../supervisors/index.js';
import { demandCache, notFound, type Principal } from '../access/index.js';

const toView = (row: CachePinRow, now: Date): PinView => ({
  hash: row.hash_part,
  store_path: row.store_path,
  created_by: row.created_by,
  created_at: row.created_at.toISOString(),
  expires_at: row.expires_at?.toISOString() ?? null,
  expired: row.expires_at !== null && row.expires_at <= now,
});

export function cachePinsService({ sql, clock }: { sql: Sql; clock: Clock }) {
  return {
    async pin(who: Principal, cache: string, hash: string, body: PinBody): Promise<PinView> {
      const { row } = await demandCache(sql, who, cache, 'writeStore');
      const now = clock.now();
      let expiresAt: Date | null = null;
      if (body.expires_in_hours !== undefined) expiresAt = new Date(now.getTime() + body.expires_in_hours * 3600_000);
      else if (body.expires_at !== undefined && body.expires_at !== null) {
        expiresAt = new Date(body.expires_at);
        if (expiresAt <= now) throw new ApiError('invalid_body', `expires_at ${body.expires_at} is not in the future`);
      }
      if (!(await findCachePath(sql, row.id, hash))) throw notFound(`path ${hash} in cache "${row.name}"`);
      const userId = who.kind === 'user' ? who.userId : null;
      await sql.begin(async (tx) => {
        await upsertCachePin(tx, row.id, hash, userId, expiresAt);
        await addPinnedClosures(tx, now, row.id, hash);
      });
      const [pinned] = await listCachePins(sql, row.id, { hashPart: hash });
      return toView(pinned!, now);
    },

    async unpin(who: Principal, cache: string, hash: string): Promise<{ hash: string; cache: string }> {
      const { row } = await demandCache(sql, who, cache, 'writeStore');
      if (!(await deleteCachePin(sql, row.id, hash))) throw notFound(`pin of ${hash} in cache "${row.name}"`);
      return { hash, cache: row.name };
    },

    /** One page of the cache's pins, newest first. */
    async list(who: Principal, cache: string, query: PinListQuery): Promise<PinPage> {
      const { row } = await demandCache(sql, who, cache, 'viewCache');
      const now = clock.now();
      const [rows, total] = await Promise.all([
        listCachePins(sql, row.id, { offset: (query.page - 1) * query.per_page, limit: query.per_page }),
        countCachePins(sql, row.id),
      ]);
      return { pins: rows.map((p) => toView(p, now)), page: query.page, per_page: query.per_page, total };
    },
  };
}
export type CachePinsService = ReturnType<typeof cachePinsService>;
