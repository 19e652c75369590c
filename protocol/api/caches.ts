// Caches (/api/v1/caches…): the cache object, create, update, the NAR management query and upstream caches.
// docs/caches.md is the prose of these shapes.
import { z } from 'zod';
import { ResourceName, Username } from './names.js';
import { Permission, Role } from './permissions.js';

export const CacheName = ResourceName;

const Priority = z.number().int().min(0).max(10_000);
/** A per-cache storage limit in bytes; null removes it (only cache.maxStorageGb applies then). */
const MaxStorageBytes = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);

export const CreateCacheBody = z.strictObject({
  name: CacheName,
  description: z.string().max(2000).optional(),
  public: z.boolean().default(false),
  priority: Priority.default(40),
});
export type CreateCacheBody = z.infer<typeof CreateCacheBody>;

export const UpdateCacheBody = z.strictObject({
  description: z.string().max(2000).optional(),
  public: z.boolean().optional(),
  priority: Priority.optional(),
  /** applied instead of priority to clients in http.localIps; 0 turns it off */
  local_priority: Priority.optional(),
  max_storage_bytes: MaxStorageBytes.nullable().optional(),
  /** kiln extension (docs/gc.md): hours a path outside the live set is kept after its last fetch, instead of gc.narTtlHours; null follows the instance */
  nar_ttl_hours: z.number().int().min(0).max(1_000_000).nullable().optional(),
  /** kiln extension (docs/gc.md): true exempts the cache's paths from the TTL (storage limits still apply) */
  keep_forever: z.boolean().optional(),
  /** hands the cache to another account (only the current owner may) */
  owner: Username.optional(),
});
export type UpdateCacheBody = z.infer<typeof UpdateCacheBody>;

/** A cache as GET/PUT/PATCH /caches… answer it, for the caller asking. */
export const CacheView = z.strictObject({
  id: z.uuid(),
  name: CacheName,
  description: z.string(),
  public: z.boolean(),
  priority: z.number().int(),
  /** applied instead of priority to clients in http.localIps when non-zero */
  local_priority: z.number().int(),
  active: z.boolean(),
  /** `<key name>:<base64>`, what Nix's trusted-public-keys takes */
  public_key: z.string(),
  /** the owner's username; null when nobody owns it or the owner's account was deleted */
  owner: z.string().nullable(),
  /** the cache's own storage limit in bytes; null: only cache.maxStorageGb applies */
  max_storage_bytes: z.number().int().nullable(),
  /** the cache's own NAR TTL in hours; null: gc.narTtlHours applies (docs/gc.md) */
  nar_ttl_hours: z.number().int().nullable(),
  /** paths are never collected by TTL (docs/gc.md) */
  keep_forever: z.boolean(),
  /** the substituter URL: `<serveUrl>/cache/<name>` */
  url: z.string(),
  state_managed: z.boolean(),
  created_at: z.iso.datetime({ offset: true }),
  /** the caller's role and what it may do here */
  role: Role.nullable(),
  permissions: z.array(Permission),
});
export type CacheView = z.infer<typeof CacheView>;

export const narSortKeys = ['created_at', 'nar_size', 'last_fetched_at'] as const;
export const NAR_PAGE_SIZE_DEFAULT = 50;
export const NAR_PAGE_SIZE_MAX = 200;

const Nix32Prefix = z.string().regex(/^[0-9a-df-np-sv-z]{1,32}$/, 'must be 1-32 characters of a store path hash (nix32: 0-9 and a-z without e, o, u, t)');
const PositiveIntText = (max: number) =>
  z.string().regex(/^\d{1,9}$/, 'must be a whole number').transform(Number).pipe(z.number().int().min(1).max(max));

/** GET /caches/{cache}/nars: the query string, every parameter optional. */
export const NarListQuery = z.strictObject({
  hash: Nix32Prefix.optional(),
  package: z.string().min(1).max(200).optional(),
  sort: z.enum(narSortKeys).default('created_at'),
  order: z.enum(['asc', 'desc']).default('desc'),
  page: PositiveIntText(1_000_000).default(1),
  per_page: PositiveIntText(NAR_PAGE_SIZE_MAX).default(NAR_PAGE_SIZE_DEFAULT),
});
export type NarListQuery = z.infer<typeof NarListQuery>;

/**
 * How kiln authenticates to a private upstream: HTTP Basic (what a netrc line gives Nix) or a
 * bearer token. Stored sealed and never shown again.
 */
export const UpstreamCredentials = z.union([
  z.strictObject({ user: z.string().min(1).max(500).refine((u) => !u.includes(':'), { message: 'must not contain ":"' }), password: z.string().max(2000) }),
  z.strictObject({ token: z.string().min(1).max(4000).refine((v) => /^[\x21-\x7e]+$/.test(v), { message: 'must be printable ASCII without spaces' }) }),
]);
export type UpstreamCredentials = z.infer<typeof UpstreamCredentials>;

/** An upstream binary cache: where it is and the key its narinfos must be signed with. */
export const UpstreamBody = z.strictObject({
  url: z
    .string()
    .max(2000)
    .url()
    .refine((u) => /^https?:\/\//i.test(u), { message: 'must be an http:// or https:// URL' })
    .refine((u) => !/^https?:\/\/[^/]*@/i.test(u), { message: 'must not carry credentials (give them as credentials: {user, password} or {token})' })
    .refine((u) => !/[?#]/.test(u), { message: 'must not have a query or a fragment' }),
  /** `<key name>:<base64 of 32 bytes>`, as Nix's trusted-public-keys lists it */
  public_key: z.string().min(3).max(300),
  /** lower is asked first */
  priority: z.number().int().min(0).max(10_000).default(50),
  /** for a private upstream; omitted: an existing upstream keeps its credentials; null removes them */
  credentials: UpstreamCredentials.nullable().optional(),
});
export type UpstreamBody = z.infer<typeof UpstreamBody>;

const Timestamp = z.iso.datetime({ offset: true });

/** One cached path as GET /caches/{cache}/nars lists it (docs/caches.md, "NAR management"). */
export const NarView = z.strictObject({
  /** the store path's hash part: how the API and the binary cache name the path */
  hash: z.string(),
  store_path: z.string(),
  /** the name part of the store path */
  package: z.string(),
  nar_hash: z.string(),
  nar_size: z.number().int(),
  file_hash: z.string(),
  file_size: z.number().int(),
  /** relative to the cache's root, as the narinfo's URL line */
  url: z.string(),
  references: z.array(z.string()),
  deriver: z.string().nullable(),
  ca: z.string().nullable(),
  signature: z.string(),
  created_at: Timestamp,
  last_fetched_at: Timestamp.nullable(),
});
export type NarView = z.infer<typeof NarView>;

/** GET /caches/{cache}/nars: one page of paths and how many match the filters. */
export const NarPageView = z.strictObject({
  items: z.array(NarView),
  page: z.number().int(),
  per_page: z.number().int(),
  total: z.number().int(),
  pages: z.number().int(),
});
export type NarPageView = z.infer<typeof NarPageView>;

/** GET /caches/{cache}/nars/{hash}: the path and how many caches hold it. */
export const NarDetailView = NarView.extend({ caches: z.number().int() });
export type NarDetailView = z.infer<typeof NarDetailView>;

/** DELETE /caches/{cache}/nars/{hash}. */
export const NarDeletionView = z.strictObject({
  hash: z.string(),
  store_path: z.string(),
  cache: z.string(),
  /** no cache holds the path any more: its NAR file goes too */
  last_copy: z.boolean(),
});
export type NarDeletionView = z.infer<typeof NarDeletionView>;

/** GET /caches/{cache}/stats. */
export const CacheStatsView = z.strictObject({
  cache: z.string(),
  paths: z.number().int(),
  /** sum of NarSize: what clients unpack */
  nar_bytes: z.number().int(),
  /** sum of the stored (zstd) file sizes: what storage limits count */
  stored_bytes: z.number().int(),
  last_upload_at: Timestamp.nullable(),
  last_fetched_at: Timestamp.nullable(),
  max_storage_bytes: z.number().int().nullable(),
  /** what the cache may still store under its own limit and cache.maxStorageGb; null when neither is set */
  bytes_left: z.number().int().nullable(),
});
export type CacheStatsView = z.infer<typeof CacheStatsView>;

/** An upstream as GET/PUT /caches/{cache}/upstreams list it; the credentials are never shown. */
export const UpstreamView = z.strictObject({
  id: z.uuid(),
  url: z.string(),
  public_key: z.string(),
  priority: z.number().int(),
  /** how kiln authenticates to it, null for none */
  auth: z.enum(['basic', 'bearer']).nullable(),
  created_at: Timestamp,
});
export type UpstreamView = z.infer<typeof UpstreamView>;
