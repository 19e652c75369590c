// API keys: GET/POST/DELETE /user/keys, and turning a presented secret into a KeyUser.
import { isIP } from 'node:net';
import { ApiError, Permission, type CreateApiKeyBody } from '../../protocol/index.js';
import { cacheIdNamed } from '../../storage/index.js';
import { generateApiKeySecret, hashApiKeySecret } from './apiKeySecret.js';
import type { IdentityDeps } from './identityDeps.js';
import type { ResolvePinnedProject } from '../projects/index.js';
import type { KeyUser, Principal } from '../access/index.js';
import { requireSession, requireUser } from '../access/index.js';

export interface ApiKeyView {
  id: string;
  name: string;
  /** the first characters of the secret */
  prefix: string;
  permissions: string[];
  /** `org/project` when pinned to a project */
  project: string | null;
  cache: string | null;
  allowed_ips: string[];
  expires_at: string | null;
  last_used_at: string | null;
  created_at: string;
  state_managed: boolean;
}

export interface CreatedApiKey extends ApiKeyView {
  /** the key itself: shown once, stored only as its SHA-256 */
  secret: string;
}

interface KeyListRow {
  id: string;
  name: string;
  secret_prefix: string;
  permissions: string[];
  project: string | null;
  cache: string | null;
  allowed_ips: string[];
  expires_at: Date | null;
  last_used_at: Date | null;
  created_at: Date;
  state_managed: boolean;
}

interface KeyAuthRow {
  id: string;
  user_id: string;
  permissions: string[];
  project_id: string | null;
  cache_id: string | null;
  expires_at: Date | null;
  last_used_at: Date | null;
  username: string;
  superuser: boolean;
  disabled: boolean;
  ip_allowed: boolean;
}

/** last_used_at is written at most this often per key, so a busy CI key does not write on every request. */
const LAST_USED_RESOLUTION_MS = 60_000;
const DAY_MS = 24 * 60 * 60 * 1000;

const toView = (r: KeyListRow): ApiKeyView => ({
  id: r.id,
  name: r.name,
  prefix: r.secret_prefix,
  permissions: r.permissions,
  project: r.project,
  cache: r.cache,
  allowed_ips: r.allowed_ips,
  expires_at: r.expires_at?.toISOString() ?? null,
  last_used_at: r.last_used_at?.toISOString() ?? null,
  created_at: r.created_at.toISOString(),
  state_managed: r.state_managed,
});

export type ApiKeys = ReturnType<typeof apiKeysService>;

export function apiKeysService({ sql, clock, events }: IdentityDeps, resolveProject: ResolvePinnedProject) {
  const listRows = (userId: string, name: string | null) => sql<KeyListRow[]>`
    select k.id, k.name, k.secret_prefix, k.permissions, o.name || '/' || p.name as project, c.name::text as cache,
           k.allowed_ips::text[] as allowed_ips,
           k.expires_at, k.last_used_at, k.created_at, k.state_managed
    from api_keys k
    left join projects p on p.id = k.project_id
    left join organizations o on o.id = p.organization_id
    left join caches c on c.id = k.cache_id
    where k.user_id = ${userId} and (${name}::text is null or k.name = ${name})
    order by k.created_at, k.name`;

  return {
    async list(who: Principal): Promise<ApiKeyView[]> {
      return (await listRows(requireUser(who).userId, null)).map(toView);
    },

    async create(who: Principal, body: CreateApiKeyBody): Promise<CreatedApiKey> {
      const user = requireSession(who, 'creating an API key');
      const project = body.project === undefined ? null : await resolveProject(body.project, user.userId);
      if (body.project !== undefined && !project) throw new ApiError('invalid_body', `project: no project "${body.project}"`);
      let cacheId: string | null = null;
      if (body.cache !== undefined) {
        cacheId = await cacheIdNamed(sql, body.cache);
        if (cacheId === null) throw new ApiError('invalid_body', `cache: no cache "${body.cache}"`);
      }
      const expiresAt = body.expires_in_days === undefined ? null : new Date(clock.now().getTime() + body.expires_in_days * DAY_MS);
      const { secret, hash, prefix } = generateApiKeySecret();
      const permissions = [...new Set(body.permissions)];
      try {
        await events.transaction(async (tx, emit) => {
          const [key] = await tx<{ id: string }[]>`
            insert into api_keys (user_id, name, secret_hash, secret_prefix, permissions, project_id, cache_id, allowed_ips, expires_at, created_at)
            values (${user.userId}, ${body.name}, ${hash}, ${prefix}, ${permissions}, ${project?.id ?? null}, ${cacheId},
                    (select coalesce(array_agg(network(a::inet)), '{}') from unnest(${body.allowed_ips}::text[]) a),
                    ${expiresAt}, ${clock.now()})
            returning id`;
          // Never the secret, its hash or its prefix.
          emit('api_key.create', {
            user: user.username, user_id: user.userId, key_id: key!.id, name: body.name, permissions,
            ...(project ? { project: project.name } : {}), ...(body.cache !== undefined ? { cache: body.cache } : {}),
          }, { userId: user.userId });
        });
      } catch (e) {
        if ((e as { code?: string }).code === '23505') throw new ApiError('key_exists', `you already have an API key named "${body.name}"`);
        throw e;
      }
      const [row] = await listRows(user.userId, body.name);
      return { ...toView(row!), secret };
    },

    async delete(who: Principal, name: string): Promise<string> {
      const user = requireSession(who, 'deleting an API key');
      const [row] = await sql<{ id: string; state_managed: boolean }[]>`select id, state_managed from api_keys where user_id = ${user.userId} and name = ${name}`;
      if (!row) throw new ApiError('key_not_found', `you have no API key named "${name}"`);
      if (row.state_managed) throw new ApiError('state_managed', `the API key "${name}" is declared in the state file; remove it there`);
      await events.transaction(async (tx, emit) => {
        const deleted = await tx`delete from api_keys where id = ${row.id} returning id`;
        if (deleted.length > 0) emit('api_key.delete', { user: user.username, user_id: user.userId, key_id: row.id, name }, { userId: user.userId });
      });
      return `API key "${name}" deleted`;
    },

    /**
     * The principal an API key stands for, as seen from `peerAddress` (already the client address:
     * X-Forwarded-For counts only from http.trustedProxies). 401 unknown or expired, 403 outside allowed_ips.
     */
    async authenticate(secret: string, peerAddress: string): Promise<KeyUser> {
      const peer = isIP(peerAddress) ? peerAddress : null;
      const [key] = await sql<KeyAuthRow[]>`
        select k.id, k.user_id, k.permissions, k.project_id, k.cache_id, k.expires_at, k.last_used_at,
               u.username, u.superuser, u.disabled,
               (cardinality(k.allowed_ips) = 0 or coalesce(${peer}::inet <<= any(k.allowed_ips), false)) as ip_allowed
        from api_keys k join users u on u.id = k.user_id
        where k.secret_hash = ${hashApiKeySecret(secret)}`;
      if (!key) throw new ApiError('invalid_token', 'the API key is not valid');
      const now = clock.now();
      if (key.expires_at !== null && key.expires_at <= now) throw new ApiError('token_expired', 'the API key has expired');
      if (key.disabled) throw new ApiError('account_disabled', 'the account owning this API key is disabled');
      if (!key.ip_allowed) throw new ApiError('forbidden_source_ip', `the API key may not be used from ${peerAddress}`);
      if (key.last_used_at === null || now.getTime() - key.last_used_at.getTime() >= LAST_USED_RESOLUTION_MS) {
        await sql`update api_keys set last_used_at = ${now} where id = ${key.id}`;
      }
      const permissions = new Set(key.permissions.flatMap((p) => (Permission.safeParse(p).success ? [p as Permission] : [])));
      return {
        kind: 'user', via: 'key', userId: key.user_id, username: key.username, superuser: key.superuser,
        keyId: key.id, permissions, projectId: key.project_id, cacheId: key.cache_id,
      };
    },
  };
}
