// SCIM 2.0 provisioning of users (scim.enable) with its own bearer token (scim.tokenFile).
// Disabling (active=false, or DELETE without scim.hardDelete) logs the user out everywhere and
// refuses every sign-in and token of the account until it is active again.
import { timingSafeEqual, createHash } from 'node:crypto';
import { readSecretFile } from '../../config/index.js';
import { ApiError, DisplayName, Email, ScimBooleanValue, SCIM_LIST_SCHEMA, Username, type ScimPatchBody, type ScimUserBody } from '../../protocol/index.js';
import type { IdentityDeps } from './identityDeps.js';
import { fieldsOf, parseScimFilter, toScimUser, type ScimUser, type ScimUserFields } from './scimUsers.js';
import type { Sessions } from './sessions.js';
import { insertUser, userConflict } from './userCreation.js';
import type { UserRow } from './userView.js';

const MAX_PAGE = 200;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface ScimList {
  schemas: string[];
  totalResults: number;
  startIndex: number;
  itemsPerPage: number;
  Resources: ScimUser[];
}

const digest = (s: string) => createHash('sha256').update(s).digest();

export type Scim = ReturnType<typeof scimService>;

export function scimService({ sql, config, events }: IdentityDeps, sessions: Sessions) {
  const baseUrl = `${config['serveUrl'].replace(/\/$/, '')}/scim/v2`;
  const view = (row: UserRow) => toScimUser(row, baseUrl);

  const find = async (id: string): Promise<UserRow> => {
    const [row] = UUID.test(id) ? await sql<UserRow[]>`select * from users where id = ${id}` : [];
    if (!row) throw new ApiError('not_found', `no user ${id}`);
    return row;
  };

  const write = async (id: string, f: ScimUserFields): Promise<UserRow> => {
    const row = await events.transaction(async (tx, emit) => {
      const [updated] = await tx<UserRow[]>`
        update users set username = ${f.username}, name = ${f.name}, email = ${f.email},
          email_verified = ${f.email !== null},
          disabled = ${!f.active}, scim_external_id = ${f.externalId}, updated_at = now()
        where id = ${id} returning *`;
      if (updated) emit('user.update', { user: updated.username, user_id: updated.id, via: 'scim', disabled: updated.disabled }, { userId: updated.id });
      return updated;
    }).catch((e: unknown) => {
      throw userConflict(e, f.username, f.email) ?? e;
    });
    if (!row) throw new ApiError('not_found', `no user ${id}`);
    if (!f.active) await sessions.revokeAll(id, 'account_disabled');
    return row;
  };

  return {
    /** Checks the SCIM bearer token (not a user's token: SCIM has its own). */
    checkToken(authorization: string | undefined): void {
      if (!config['scim.enable']) throw new ApiError('not_found', 'SCIM is not enabled on this server (scim.enable)');
      const file = config['scim.tokenFile'];
      if (!file) throw new ApiError('scim_unavailable', 'SCIM is enabled but scim.tokenFile is not set');
      const presented = /^Bearer (.+)$/i.exec(authorization ?? '')?.[1] ?? '';
      // Hashing first gives equal lengths, so the comparison time says nothing about the token.
      if (!timingSafeEqual(digest(presented), digest(readSecretFile(file)))) throw new ApiError('unauthorized', 'the SCIM bearer token is missing or wrong');
    },

    async list(query: URLSearchParams): Promise<ScimList> {
      const startIndex = Math.max(1, Number.parseInt(query.get('startIndex') ?? '1', 10) || 1);
      const count = Math.min(MAX_PAGE, Math.max(0, Number.parseInt(query.get('count') ?? '100', 10) || 0));
      const filterText = query.get('filter');
      const filter = filterText === null ? null : parseScimFilter(filterText);
      if (filterText !== null && !filter) throw new ApiError('invalid_filter', `unsupported filter ${JSON.stringify(filterText)}: kiln supports userName eq "…" and externalId eq "…"`);
      const where = !filter ? sql`true` : filter.attribute === 'userName' ? sql`username = ${filter.value}` : sql`scim_external_id = ${filter.value}`;
      const [total] = await sql<{ n: number }[]>`select count(*)::int as n from users where ${where}`;
      const rows = await sql<UserRow[]>`select * from users where ${where} order by created_at, id offset ${startIndex - 1} limit ${count}`;
      return { schemas: [SCIM_LIST_SCHEMA], totalResults: total!.n, startIndex, itemsPerPage: rows.length, Resources: rows.map(view) };
    },

    async get(id: string): Promise<ScimUser> {
      return view(await find(id));
    },

    async create(body: ScimUserBody): Promise<ScimUser> {
      const f = fieldsOf(body);
      const row = await insertUser(events, {
        via: 'scim',
        username: f.username, name: f.name, email: f.email, emailVerified: f.email !== null,
        passwordHash: null, scimExternalId: f.externalId, firstBecomesSuperuser: false,
      });
      return view(f.active ? row : await write(row.id, f));
    },

    async replace(id: string, body: ScimUserBody): Promise<ScimUser> {
      await find(id);
      return view(await write(id, fieldsOf(body)));
    },

    /** PATCH: active, userName, displayName, name.formatted, externalId and the primary e-mail. */
    async patch(id: string, body: ScimPatchBody): Promise<ScimUser> {
      const row = await find(id);
      const f: ScimUserFields = { username: row.username, name: row.name, email: row.email, active: !row.disabled, externalId: row.scim_external_id };
      for (const op of body.Operations) {
        // Without a path, the value is an object of attributes (RFC 7644 §3.5.2).
        const changes: [string, unknown][] = op.path === undefined
          ? Object.entries(typeof op.value === 'object' && op.value !== null ? op.value : {})
          : [[op.path, op.op === 'remove' ? null : op.value]];
        for (const [path, value] of changes) applyChange(f, path, value);
      }
      return view(await write(id, f));
    },

    async delete(id: string): Promise<void> {
      const row = await find(id);
      if (config['scim.hardDelete']) {
        await events.transaction(async (tx, emit) => {
          await tx`delete from users where id = ${row.id}`;
          emit('user.delete', { user: row.username, user_id: row.id, via: 'scim' }, { userId: row.id });
        });
      }
      else await write(row.id, { username: row.username, name: row.name, email: row.email, active: false, externalId: row.scim_external_id });
    },
  };
}

function applyChange(f: ScimUserFields, path: string, value: unknown): void {
  const invalid = (what: string) => new ApiError('invalid_body', `${path}: ${what}`);
  const parse = <T>(schema: { safeParse(v: unknown): { success: true; data: T } | { success: false } }, what: string): T => {
    const r = schema.safeParse(value);
    if (!r.success) throw invalid(what);
    return r.data;
  };
  switch (path.toLowerCase()) {
    case 'active':
      f.active = parse(ScimBooleanValue, 'must be a boolean');
      return;
    case 'username':
      f.username = parse(Username, 'must be 1-63 letters, digits, "_", "." or "-"');
      return;
    case 'displayname':
    case 'name.formatted':
      f.name = parse(DisplayName, 'must be a string of at most 200 characters');
      return;
    case 'externalid':
      f.externalId = value === null ? null : parse(DisplayName, 'must be a string of at most 200 characters');
      return;
    case 'emails':
    case 'emails[primary eq true].value':
    case 'emails[type eq "work"].value': {
      const raw = Array.isArray(value) ? ((value[0] as { value?: unknown } | undefined)?.value ?? null) : value;
      if (raw === null) f.email = null;
      else {
        const r = Email.safeParse(raw);
        if (!r.success) throw invalid('must be an e-mail address');
        f.email = r.data;
      }
      return;
    }
    default:
      throw new ApiError('invalid_scim_path', `kiln cannot change the SCIM attribute "${path}"`);
  }
}
