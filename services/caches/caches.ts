// Caches (spec: Caches; DESIGN.md, "The model"): create with a fresh Ed25519 key, list what the
// caller may see, read, change, delete, enable/disable, and the public key Nix is told to trust.
// The creator owns the cache and is its Admin; members come by invitation (invitations.ts).
import { ApiError, type CacheView, type CreateCacheBody, type Permission, type UpdateCacheBody } from '../../protocol/index.js';
import { candidateCacheRows, deleteCache, insertCache, setCacheActive, updateCacheSettings, type CacheRow } from '../../storage/index.js';
import { accessOf, forbidden, notFound, permissionList, userIdOf, type Access } from '../access/index.js';
import type { CacheDeps } from './cacheDeps.js';
import { cachePublicKeyText, generateCacheKey, keyHost } from './cacheKeys.js';
import { demandCreationAllowed } from '../access/index.js';
import { findUserId } from '../access/index.js';
import type { Principal } from '../access/index.js';
import { demandNotStateManaged } from '../access/index.js';
import { cacheTarget, demandCache, findCacheById, userOf } from '../access/index.js';

const isUniqueViolation = (e: unknown): boolean => typeof e === 'object' && e !== null && (e as { code?: string }).code === '23505';

/** The caller owns the cache (or nobody does and it may manage it): ownership decides the destructive acts. */
export function demandOwner(who: Principal, row: CacheRow, access: Access, what: string): void {
  if (!access.permissions.has('manageCache')) throw forbidden('manageCache', `cache "${row.name}"`);
  const isOwner = who.kind === 'user' && row.owner_id === who.userId;
  if (!isOwner && row.owner_id !== null) {
    throw new ApiError('owner_only', `${what} is for the owner of cache "${row.name}" (${row.owner ?? 'unknown'}) only`);
  }
}

/** The names of the settings a PATCH body changes, for cache.update's `changes`. */
const changedSettings = (body: UpdateCacheBody): string[] => Object.entries(body).filter(([, value]) => value !== undefined).map(([name]) => name);

export function cachesService({ sql, config, secretBox, events }: CacheDeps) {
  const serveUrl = config['serveUrl'].replace(/\/+$/, '');
  const toView = (row: CacheRow, access: Access): CacheView => ({
    id: row.id,
    name: row.name,
    description: row.description,
    public: row.public,
    priority: row.priority,
    local_priority: row.local_priority,
    active: row.active,
    public_key: cachePublicKeyText(row),
    owner: row.owner,
    max_storage_bytes: row.max_storage_bytes === null ? null : Number(row.max_storage_bytes),
    nar_ttl_hours: row.nar_ttl_hours,
    keep_forever: row.keep_forever,
    url: `${serveUrl}/cache/${row.name}`,
    state_managed: row.state_managed,
    created_at: row.created_at.toISOString(),
    role: row.role,
    permissions: permissionList(access),
  });

  /** The cache with the caller's access: 404 when it may not see it, 403 naming `permission` when it lacks it. */
  const demandRecord = (who: Principal, name: string, permission: Permission) => demandCache(sql, who, name, permission);

  async function viewById(who: Principal, id: string): Promise<CacheView> {
    const row = await findCacheById(sql, who, id);
    if (!row) throw notFound(`cache ${id}`);
    return toView(row, accessOf(who, cacheTarget(row)));
  }

  return {
    demandRecord,

    /** Every cache the caller may see: public ones, and those it owns or is a member of (a pinned key: only its cache). */
    async list(who: Principal): Promise<CacheView[]> {
      userIdOf(who);
      const rows = await candidateCacheRows(sql, userOf(who));
      return rows.flatMap((row) => {
        const access = accessOf(who, cacheTarget(row));
        return access.visible ? [toView(row, access)] : [];
      });
    },

    /** permissions.createCache decides who may; the creator becomes the owner (Admin). */
    async create(who: Principal, body: CreateCacheBody): Promise<CacheView> {
      const userId = userIdOf(who);
      demandCreationAllowed(who, config['permissions.createCache'], 'caches', 'permissions.createCache');
      if (who.kind === 'user' && who.via === 'key') {
        if (who.projectId !== null || who.cacheId !== null) throw new ApiError('forbidden', 'a key pinned to a project or cache cannot create caches');
        if (!who.permissions.has('manageCache')) throw new ApiError('forbidden', 'manageCache is required on the key to create a cache');
      }
      const key = generateCacheKey(secretBox, keyHost({ domain: config['domain'], serveUrl: config['serveUrl'] }), body.name);
      try {
        const id = await events.transaction(async (tx, emit) => {
          const inserted = await insertCache(tx, {
            name: body.name, description: body.description ?? '', public: body.public, priority: body.priority, owner_id: userId, ...key,
          });
          emit('cache.create', { cache: body.name, cache_id: inserted, public: body.public }, { cacheId: inserted });
          // also makes every process forget a miss it remembers for this name (binaryCacheAccess.ts)
          emit('cache.changed', { cache: body.name, reason: 'create' }, { cacheId: inserted });
          return inserted;
        });
        return viewById(who, id);
      } catch (e) {
        if (isUniqueViolation(e)) throw new ApiError('cache_exists', `a cache named "${body.name}" exists`);
        throw e;
      }
    },

    async get(who: Principal, name: string): Promise<CacheView> {
      const { row, access } = await demandRecord(who, name, 'viewCache');
      return toView(row, access);
    },

    async update(who: Principal, name: string, body: UpdateCacheBody): Promise<CacheView> {
      const { row, access } = await demandRecord(who, name, 'manageCache');
      demandNotStateManaged(row, `cache "${row.name}"`);
      let ownerId = row.owner_id;
      if (body.owner !== undefined) {
        demandOwner(who, row, access, 'handing over the cache');
        ownerId = await findUserId(sql, body.owner);
      }
      const maxStorage = body.max_storage_bytes === undefined ? row.max_storage_bytes : body.max_storage_bytes;
      const narTtl = body.nar_ttl_hours === undefined ? row.nar_ttl_hours : body.nar_ttl_hours;
      await events.transaction(async (tx, emit) => {
        await updateCacheSettings(tx, row.id, {
          description: body.description ?? null, public: body.public ?? null, priority: body.priority ?? null,
          local_priority: body.local_priority ?? null, max_storage_bytes: maxStorage, owner_id: ownerId,
          nar_ttl_hours: narTtl, keep_forever: body.keep_forever ?? null,
        });
        const changes = changedSettings(body);
        emit('cache.update', { cache: row.name, cache_id: row.id, public: body.public ?? row.public, changes }, { cacheId: row.id });
        emit('cache.changed', { cache: row.name, reason: 'update' }, { cacheId: row.id });
      });
      return viewById(who, row.id);
    },

    /** Deletes the cache: its signature rows go with it; paths no other cache holds are swept later. */
    async remove(who: Principal, name: string): Promise<string> {
      const { row, access } = await demandRecord(who, name, 'manageCache');
      demandNotStateManaged(row, `cache "${row.name}"`);
      demandOwner(who, row, access, 'deleting the cache');
      await events.transaction(async (tx, emit) => {
        // Reaches instance webhooks; the cache's own webhooks are deleted with it.
        emit('cache.delete', { cache: row.name, cache_id: row.id, public: row.public }, { cacheId: row.id });
        emit('cache.changed', { cache: row.name, reason: 'delete' }, { cacheId: row.id });
        await deleteCache(tx, row.id);
      });
      return `cache "${row.name}" deleted`;
    },

    /** An inactive cache serves nothing (404 at /cache/{cache}) and takes no uploads. */
    async setActive(who: Principal, name: string, active: boolean): Promise<CacheView> {
      const { row } = await demandRecord(who, name, 'manageCache');
      await events.transaction(async (tx, emit) => {
        await setCacheActive(tx, row.id, active);
        emit('cache.update', { cache: row.name, cache_id: row.id, public: row.public, changes: ['active'], active }, { cacheId: row.id });
        emit('cache.changed', { cache: row.name, reason: active ? 'enabled' : 'disabled' }, { cacheId: row.id });
      });
      return viewById(who, row.id);
    },

    /** `<key name>:<base64>`: what to add to Nix's trusted-public-keys. Anyone who may see the cache. */
    async publicKey(who: Principal, name: string): Promise<string> {
      const { row } = await demandRecord(who, name, 'viewCache');
      return cachePublicKeyText(row);
    },
  };
}
export type CachesService = ReturnType<typeof cachesService>;
