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
