// The authorization matrix: every endpoint of organizations, projects, tasks, servers, members,
// invitations, subscriptions and worker registrations × every kind of credential × every
// relation to the target, each cell's status asserted. One table (`endpoints`) drives it; the
// expected status comes from the row's required role and permission (`expectedStatus`), so a
// new endpoint is one new row. Later issues add their rows here; the binary cache paths, which
// take HTTP Basic per cache, are in authorizationMatrixBinaryCache.test.ts (one file each keeps
// both under the test runner's per-file timeout). The rows run in parts, one test file each
// (authorizationMatrixPart*.test.ts), so each part's server answers in parallel with the others
// and no file nears the per-file timeout as rows are added; each part seeds its own server.
import t from 'tap';
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { permissionNames, type Permission } from '../../protocol/index.js';
import { startTestKiln, type TestKiln } from '../support/kiln.js';
import { signUp, type TestAccount } from '../support/accounts.js';
import { openLive, type LiveRefusal } from '../support/events.js';
import { openCacheProto, type CacheProtoRefusal } from '../support/cacheProtoClient.js';
import { createTestCache } from '../support/caches.js';
import { generateSshKeyPair } from '../../services/organizations/sshKeys.js';
import { exportStream, multipartBody, syntheticDrv } from '../support/directClosure.js';
import { gzipSync } from 'node:zlib';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

type Role = 'View' | 'Write' | 'Admin';
type Persona = 'nonMember' | 'View' | 'Write' | 'Admin' | 'superuser';
type Credential = 'none' | 'session' | 'keyWithPermission' | 'keyWithoutPermission' | 'keyPinnedElsewhere' | 'keyOutsideAllowedIps' | 'expiredKey';

const personas: Persona[] = ['nonMember', 'View', 'Write', 'Admin', 'superuser'];
const credentials: Credential[] = ['none', 'session', 'keyWithPermission', 'keyWithoutPermission', 'keyPinnedElsewhere', 'keyOutsideAllowedIps', 'expiredKey'];

interface Ctx {
  kiln: TestKiln;
  persona: Persona;
  user: TestAccount;
  ids: Record<string, string>;
  seq: () => number;
}

interface Endpoint {
  method: 'GET' | 'PUT' | 'POST' | 'PATCH' | 'DELETE';
  path: string | ((c: Ctx) => string);
  body?: Record<string, unknown> | ((c: Ctx) => Record<string, unknown>);
  /**
   * organization / project / cache: the persona's role there decides; user: any signed-in
   * account, about itself; create: creating a top-level thing (no role involved)
   */
  scope: 'organization' | 'project' | 'cache' | 'user' | 'create' | 'superuser' | 'scrapeToken' | 'hookSignature' | 'public' | 'capability';
  /** the least role that may (scoped rows) */
  role?: Role;
  /** the permission a key must hold; null: visibility alone */
  permission: Permission | null;
  sessionOnly?: boolean;
  /** a key pinned to another project or cache, when it is not a 404 */
  pinnedElsewhere?: number;
  /** puts the target back into the state the call expects (the previous cell may have changed it) */
  before?: (c: Ctx) => Promise<unknown>;
  /** a body that is not JSON (multipart, a tarball), sent as is */
  raw?: () => { body: Buffer; contentType: string };
  /** a WebSocket path: opened for real (test/support/events.ts openLive); 200 when it opens */
  socket?: true;
  /** the cache protocol WebSocket (an absolute path, /cache/{cache}/proto): 200 at `ready`, else the HTTP status or close code − 4000 */
  cacheSocket?: true;
  /** a path outside /api/v1 (the shared evaluation cache's, at the server's root): called as is */
  atRoot?: true;
  /** the status of an admitted call when it is not 200 (202 for a requested collection run) */
  ok?: number;
  /**
   * a scoped row superusers may also use (a worker's samples): a superuser's session and its unpinned
   * keys holding admin (the row's keys lack only the row's permission) get 200; its pinned key is a
   * stranger like any other (404)
   */
  superuserReads?: true;
  /** a cell the role rules do not decide (a superuser power on a scoped row), else undefined */
  special?: (persona: Persona, credential: Credential) => number | undefined;
}

const rank: Record<Role, number> = { View: 1, Write: 2, Admin: 3 };

/** The expected status of one cell: the rules of docs/permissions.md, written out once. */
function expectedStatus(e: Endpoint, persona: Persona, credential: Credential): number {
  const status = e.special?.(persona, credential) ?? refusalOrOk(e, persona, credential);
  return status === 200 ? e.ok ?? 200 : status;
}

function refusalOrOk(e: Endpoint, persona: Persona, credential: Credential): number {
  // A public description (the OpenAPI document): every caller gets it, whatever credential came, a broken one included.
  if (e.scope === 'public') return 200;
  // The Prometheus scrape takes only the token of metrics.tokenFile: no session or key of anyone opens it.
  if (e.scope === 'scrapeToken') return 401;
  // The Git host's webhooks take only the signature of gitHostApp.webhookSecretFile: a kiln credential opens nothing.
  if (e.scope === 'hookSignature') return 401;
  // An evaluation job's capability token (?token=) only: no account, session or key is one, a
  // superuser's included, and the route looks at none of them; without it the evaluation's cache is no cache (404).
  if (e.scope === 'capability') return 404;
  if (credential === 'none' || credential === 'expiredKey') return 401;
  if (credential === 'keyOutsideAllowedIps') return 403;
  const isKey = credential !== 'session';
  if (e.sessionOnly && isKey) return 403;
  if (e.scope === 'user') return 200;
  // Instance-wide things: superusers only; through a key only with the row's permission (admin) and
  // never a key pinned to a project or cache. Anyone else's key gains nothing from admin.
  if (e.scope === 'superuser') {
    const keyLacks = credential === 'keyPinnedElsewhere' || (credential === 'keyWithoutPermission' && e.permission !== null);
    return persona === 'superuser' && !keyLacks ? 200 : 403;
  }
  if (e.scope === 'create') return credential === 'keyPinnedElsewhere' || credential === 'keyWithoutPermission' ? 403 : 200;
  if (e.superuserReads && persona === 'superuser' && credential !== 'keyPinnedElsewhere') return 200;
  // A superuser is not an implicit member: without a role it is a stranger.
  const role: Role | null = persona === 'nonMember' || persona === 'superuser' ? null : persona;
  if (role === null) return 404;
  if (credential === 'keyPinnedElsewhere') return e.pinnedElsewhere ?? 404;
  if (credential === 'keyWithoutPermission' && e.permission !== null) return 403;
  return rank[role] >= rank[e.role ?? 'View'] ? 200 : 403;
}

const ensureOrgMember = (user: string, org = 'acme') => (c: Ctx) => c.kiln.sql`
  insert into organization_members (organization_id, user_id, role)
  select o.id, u.id, 'View' from organizations o, users u where o.name = ${org} and u.username = ${user} on conflict do nothing`;
const dropOrgMember = (user: string) => (c: Ctx) => c.kiln.sql`
  delete from organization_members where user_id = (select id from users where username = ${user}) and organization_id = ${c.ids['acme']!}`;
const ensureProjectMember = (user: string) => (c: Ctx) => c.kiln.sql`
  insert into project_members (project_id, user_id, role) select ${c.ids['web']!}, id, 'View' from users where username = ${user} on conflict do nothing`;
const clearProjectInvites = (user: string) => async (c: Ctx) => {
  await c.kiln.sql`delete from invitations where user_id = (select id from users where username = ${user})`;
  await c.kiln.sql`delete from project_members where user_id = (select id from users where username = ${user})`;
};
const ensureCacheMember = (user: string) => (c: Ctx) => c.kiln.sql`
  insert into cache_members (cache_id, user_id, role) select ${c.ids['main']!}, id, 'View' from users where username = ${user} on conflict do nothing`;
const clearCacheMember = (user: string) => async (c: Ctx) => {
  await c.kiln.sql`delete from invitations where user_id = (select id from users where username = ${user})`;
  await c.kiln.sql`delete from cache_members where user_id = (select id from users where username = ${user})`;
};
const clearSubscriptions = (c: Ctx) => c.kiln.sql`delete from subscriptions where cache_id = ${c.ids['pub']!}`.then(() => c.kiln.sql`delete from subscription_requests`);
const pendingRequest = (column: 'project_id' | 'organization_id', key: string) => async (c: Ctx) => {
  await clearSubscriptions(c);
  await c.kiln.sql`insert into subscription_requests (${c.kiln.sql(column)}, cache_id, mode) values (${c.ids[key]!}, ${c.ids['pub']!}, 0)`;
};
const mainRequest = async (c: Ctx) => {
  await c.kiln.sql`delete from subscriptions where cache_id = ${c.ids['main']!}`;
  await c.kiln.sql`delete from subscription_requests where cache_id = ${c.ids['main']!}`;
  await c.kiln.sql`insert into subscription_requests (id, project_id, cache_id, mode) values (${c.ids['request']!}, ${c.ids['other']!}, ${c.ids['main']!}, 1)`;
};
/** A cached path 000…0 in main (the NAR show and pin rows). */
const ensureMatrixPath = async (c: Ctx) => {
  const [path] = await c.kiln.sql<{ id: string }[]>`
    insert into cached_paths (hash_part, store_path, nar_hash, nar_size, file_hash, file_size, listing)
    values (${'0'.repeat(32)}, ${`/nix/store/${'0'.repeat(32)}-matrix`}, 'sha256:matrix', 1, ${'1'.repeat(52)}, 1, '{}')
    on conflict (hash_part, nar_hash, narinfo_key) do update set nar_size = 1 returning id`;
  await c.kiln.sql`insert into path_signatures (cache_id, hash_part, cached_path_id, signature)
    values (${c.ids['main']!}, ${'0'.repeat(32)}, ${path!.id}, 'test-main-1:x') on conflict do nothing`;
};
const membersOf = async (c: Ctx, table: 'organization_members', orgId: string) => {
  for (const [username, role] of [['view', 'View'], ['write', 'Write'], ['admin', 'Admin']] as const) {
    await c.kiln.sql`insert into ${c.kiln.sql(table)} (organization_id, user_id, role) select ${orgId}, id, ${role} from users where username = ${username} on conflict do nothing`;
  }
};

// Webhooks (issue 6): the same sub-resources in every scope; `id` is a webhook the rows keep alive.
const ensureWebhook = (id: string, column: 'project_id' | 'cache_id' | null, key: string | null) => (c: Ctx) => c.kiln.sql`
  insert into webhooks (id, project_id, cache_id, url, secret)
  values (${id}, ${column === 'project_id' ? c.ids[key!]! : null}, ${column === 'cache_id' ? c.ids[key!]! : null}, 'http://127.0.0.1:9/hook', '\\x00')
  on conflict do nothing`;
// A finished (dead) delivery of the webhook, for the history and redeliver rows: its id is the
// webhook's with the last digit pair replaced.
const deliveryOf = (webhookId: string) => `${webhookId.slice(0, -2)}d1`;
const ensureDelivery = (id: string, column: 'project_id' | 'cache_id' | null, key: string | null) => async (c: Ctx) => {
  await ensureWebhook(id, column, key)(c);
  const event = `${id.slice(0, -2)}e1`;
  await c.kiln.sql`insert into event_outbox (id, event, body) values (${event}, 'webhook.ping', '{}') on conflict do nothing`;
  await c.kiln.sql`
    insert into event_deliveries (id, event_id, webhook_id, status, attempts, finished_at)
    values (${deliveryOf(id)}, ${event}, ${id}, 'dead', 6, now()) on conflict do nothing`;
};
const webhookRows = (base: string, id: string, access: Pick<Endpoint, 'scope' | 'role' | 'permission'>, column: 'project_id' | 'cache_id' | null, key: string | null): Endpoint[] => {
  const before = ensureWebhook(id, column, key);
  const withDelivery = ensureDelivery(id, column, key);
  return [
    { method: 'GET', path: `${base}/${id}/deliveries/${deliveryOf(id)}`, ...access, before: withDelivery },
    { method: 'POST', path: `${base}/${id}/deliveries/${deliveryOf(id)}/redeliver`, ...access, before: withDelivery },
    { method: 'GET', path: base, ...access },
    { method: 'PUT', path: base, body: { url: 'http://127.0.0.1:9/put' }, ...access },
    { method: 'POST', path: base, body: { url: 'http://127.0.0.1:9/post' }, ...access },
    { method: 'GET', path: `${base}/${id}`, ...access, before },
    { method: 'PATCH', path: `${base}/${id}`, body: { description: 'matrix' }, ...access, before },
    { method: 'POST', path: `${base}/${id}/rotate-secret`, ...access, before },
    { method: 'POST', path: `${base}/${id}/test`, ...access, before },
    { method: 'GET', path: `${base}/${id}/deliveries`, ...access, before },
    { method: 'DELETE', path: `${base}/${id}`, ...access, before },
  ];
};
// A worker that connected for acme/web, with one sample (the worker samples row).
const MATRIX_WORKER = '0e0e0e0e-0000-4000-8000-0000000000b1';
const ensureMatrixWorker = async (c: Ctx) => {
  const [connection] = await c.kiln.sql<{ id: string }[]>`
    insert into worker_connections (id, worker_id, hello, projects, disconnected_at)
    values ('0e0e0e0e-0000-4000-8000-0000000000b2', ${MATRIX_WORKER}, '{}', ${[c.ids['web']!]}::uuid[], now())
    on conflict (id) do update set projects = excluded.projects returning id`;
  await c.kiln.sql`insert into worker_samples (worker_id, connection_id, sampled_at, load1, memory_free_bytes, memory_total_bytes, build_slots, builds_running, eval_slots, evals_running)
    values (${MATRIX_WORKER}, ${connection!.id}, now(), 1, 1, 1, 1, 0, 1, 0) on conflict do nothing`;
};
const TASK_ACTION = '0e0e0e0e-0000-4000-8000-0000000000a1';
const ensureTaskAction = (c: Ctx) => c.kiln.sql`
  insert into task_actions (id, task_id, name, kind, url, secret)
  select ${TASK_ACTION}, id, 'matrix', 'send_web_request', 'http://127.0.0.1:9/action', '\\x00' from tasks
  where project_id = ${c.ids['web']!} and name = 'default'
  on conflict do nothing`;

const MATRIX_EVALUATION = '0e0e0e0e-0000-4000-8000-0000000000c1';
const MATRIX_BUILD = '0e0e0e0e-0000-4000-8000-0000000000c2';
/** An evaluation of acme/web with one completed build and a stored log line (the build data rows). */
async function seedBuild(kiln: TestKiln, projectId: string): Promise<void> {
  await kiln.sql`insert into evaluations (id, task_id, repository, wildcard, phase)
    select ${MATRIX_EVALUATION}, id, 'file:///nonexistent', '*', 'completed' from tasks where project_id = ${projectId} and name = 'default'`;
  const [drv] = await kiln.sql<{ id: string }[]>`insert into derivations (drv_path, name, system, outputs)
    values ('/nix/store/0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a-matrix.drv', 'matrix', 'x86_64-linux', ${kiln.sql.json({ out: '/nix/store/0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0b-matrix' })}) returning id`;
  const [db] = await kiln.sql<{ id: string }[]>`insert into derivation_builds (derivation_id, status, attempts) values (${drv!.id}, 'completed', 1) returning id`;
  await kiln.sql`insert into builds (id, evaluation_id, derivation_build_id, entry_point, attr) values (${MATRIX_BUILD}, ${MATRIX_EVALUATION}, ${db!.id}, true, 'packages.matrix')`;
  await kiln.sql`insert into build_log_chunks (derivation_build_id, attempt, seq, data) values (${db!.id}, 1, 0, ${Buffer.from('built\n')})`;
}

/**
 * An evaluation of acme/web that is evaluating, with an input cache capability (the hash of a token
 * no caller sends): its shared evaluation cache answers to that token only (docs/eval-cache.md).
 */
const MATRIX_RUNNING_EVALUATION = '0e0e0e0e-0000-4000-8000-0000000000c3';
const ensureRunningEvaluation = (c: Ctx) => c.kiln.sql`
  insert into evaluations (id, task_id, repository, wildcard, phase, input_cache_token_hash)
  select ${MATRIX_RUNNING_EVALUATION}, id, 'file:///nonexistent', '*', 'evaluating', ${'c'.repeat(64)} from tasks where project_id = ${c.ids['web']!} and name = 'default'
  on conflict (id) do update set phase = 'evaluating', input_cache_token_hash = excluded.input_cache_token_hash`;

// Direct builds need a cache with a real signing key that project web writes into.
const DIRECT_CLOSURE = exportStream([syntheticDrv('matrix-direct')]);
let directCache: Promise<unknown> | null = null;
// An earlier row (DELETE /projects/acme/web/active) leaves the project disabled: enable it again.
const ensureDirectCache = async (c: Ctx) => {
  await (directCache ??= createTestCache(c.kiln.sql, 'direct-target', { public: true })
    .then((cache) => c.kiln.sql`insert into subscriptions (project_id, cache_id, mode) values (${c.ids['web']!}, ${cache.id}, 0)`));
  await c.kiln.sql`update projects set active = true where id = ${c.ids['web']!}`;
};
const SOURCE_TARBALL = gzipSync(Buffer.concat([Buffer.alloc(257), Buffer.from('ustar\x0000'), Buffer.alloc(1024 - 265)]));
// POST /build-requests/source/{id}/evaluate: an upload the calling persona made (another's is a 404 to anyone).
const MATRIX_SOURCE_UPLOAD = '0e0e0e0e-0000-4000-8000-0000000000d1';
const ensureOwnSourceUpload = async (c: Ctx) => {
  await c.kiln.sql`update projects set active = true where id = ${c.ids['web']!}`;
  await c.kiln.sql`
    insert into source_uploads (id, project_id, created_by, blob_key, size, sha256, format, token_hash, expires_at)
    values (${MATRIX_SOURCE_UPLOAD}, ${c.ids['web']!}, ${c.user.id}, ${`build-sources/${MATRIX_SOURCE_UPLOAD}`}, 1, ${'a'.repeat(64)}, 'gzip', ${'b'.repeat(64)}, now() + interval '1 day')
    on conflict (id) do update set created_by = excluded.created_by, expires_at = excluded.expires_at`;
};
const MATRIX_COMMIT = 'c'.repeat(40);
const ensureCommit = (c: Ctx) => c.kiln.sql`
  insert into evaluations (task_id, repository, commit, wildcard)
  select id, 'file:///nonexistent', ${MATRIX_COMMIT}, 'packages.*' from tasks where project_id = ${c.ids['web']!} and name = 'default'
    and not exists (select 1 from evaluations where commit = ${MATRIX_COMMIT})`;

// POST /evals/{id}: an evaluation of its own task (restarts add evaluations, which eval.maxKeep
// prunes per task), put back in the phase the action expects before each cell.
const MATRIX_ACTION_EVALUATION = '0e0e0e0e-0000-4000-8000-0000000000c2';
const resetActionEvaluation = (phase: 'queued' | 'failed') => async (c: Ctx) => {
  await c.kiln.sql`insert into tasks (project_id, name) values (${c.ids['web']!}, 'matrix-actions') on conflict do nothing`;
  await c.kiln.sql`update projects set active = true where id = ${c.ids['web']!}`;
  await c.kiln.sql`
    insert into evaluations (id, task_id, repository, commit, wildcard, phase)
    select ${MATRIX_ACTION_EVALUATION}, id, 'file:///nonexistent', ${'d'.repeat(40)}, 'packages.*', ${phase} from tasks
    where project_id = ${c.ids['web']!} and name = 'matrix-actions'
    on conflict (id) do update set phase = excluded.phase`;
};

// POST /builds/{id}: a build of a building evaluation of its own task, put back in the status the
// action expects (and the evaluation back to building, which an abort may have completed) before each cell.
const MATRIX_ACTION_BUILD = '0e0e0e0e-0000-4000-8000-0000000000c4';
const MATRIX_ACTION_BUILD_EVALUATION = '0e0e0e0e-0000-4000-8000-0000000000c3';
const resetActionBuild = (status: 'queued' | 'failed') => async (c: Ctx) => {
  await c.kiln.sql`insert into tasks (project_id, name) values (${c.ids['web']!}, 'matrix-build-actions') on conflict do nothing`;
  await c.kiln.sql`
    insert into evaluations (id, task_id, repository, commit, wildcard, phase)
    select ${MATRIX_ACTION_BUILD_EVALUATION}, id, 'file:///nonexistent', ${'e'.repeat(40)}, 'packages.*', 'building' from tasks
    where project_id = ${c.ids['web']!} and name = 'matrix-build-actions'
    on conflict (id) do update set phase = excluded.phase, finished_at = null`;
  const [drv] = await c.kiln.sql<{ id: string }[]>`insert into derivations (drv_path, name, system, outputs)
    values ('/nix/store/0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0c-matrix-action.drv', 'matrix-action', 'x86_64-linux', ${c.kiln.sql.json({ out: '/nix/store/0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0d-matrix-action' })})
    on conflict (drv_path) do update set name = excluded.name returning id`;
  const [db] = await c.kiln.sql<{ id: string }[]>`insert into derivation_builds (derivation_id, status, failure_class, failure_reason)
    values (${drv!.id}, ${status}, ${status === 'failed' ? 'FailedPermanent' : null}, ${status === 'failed' ? 'builder_failed' : null})
    on conflict (derivation_id) do update set status = excluded.status, failure_class = excluded.failure_class, failure_reason = excluded.failure_reason returning id`;
  await c.kiln.sql`insert into builds (id, evaluation_id, derivation_build_id, attr) values (${MATRIX_ACTION_BUILD}, ${MATRIX_ACTION_BUILD_EVALUATION}, ${db!.id}, 'packages.action')
    on conflict (id) do nothing`;
};

const endpoints: Endpoint[] = [
  // organizations
  { method: 'GET', path: '/orgs', scope: 'user', permission: null },
  { method: 'PUT', path: '/orgs', body: (c) => ({ name: `org-${c.seq()}` }), scope: 'create', permission: 'manageOrg' },
  { method: 'GET', path: '/orgs/acme', scope: 'organization', role: 'View', permission: 'viewOrg' },
  { method: 'PATCH', path: '/orgs/acme', body: { description: 'rockets' }, scope: 'organization', role: 'Admin', permission: 'manageOrg' },
  {
    method: 'DELETE', path: '/orgs/doomed', scope: 'organization', role: 'Admin', permission: 'manageOrg',
    before: async (c) => {
      const [o] = await c.kiln.sql<{ id: string }[]>`
        insert into organizations (name, ssh_public_key, ssh_private_key) values ('doomed', 'ssh-ed25519 AAAA x', '\\x00')
        on conflict (name) do update set name = excluded.name returning id`;
      await membersOf(c, 'organization_members', o!.id);
    },
  },
  { method: 'GET', path: '/orgs/acme/users', scope: 'organization', role: 'View', permission: 'viewOrg' },
  { method: 'POST', path: '/orgs/acme/users', body: { user: 'extra', role: 'View' }, scope: 'organization', role: 'Admin', permission: 'manageOrgMembers', before: dropOrgMember('extra') },
  { method: 'PATCH', path: '/orgs/acme/users', body: { user: 'extra', role: 'Write' }, scope: 'organization', role: 'Admin', permission: 'manageOrgMembers', before: ensureOrgMember('extra') },
  { method: 'DELETE', path: '/orgs/acme/users', body: { user: 'extra' }, scope: 'organization', role: 'Admin', permission: 'manageOrgMembers', before: ensureOrgMember('extra') },
  { method: 'GET', path: '/orgs/acme/ssh', scope: 'organization', role: 'View', permission: 'viewOrg' },
  { method: 'POST', path: '/orgs/acme/ssh', scope: 'organization', role: 'Admin', permission: 'manageServers' },
  { method: 'GET', path: '/orgs/acme/subscribe', scope: 'organization', role: 'View', permission: 'viewOrg' },
  { method: 'POST', path: '/orgs/acme/subscribe/pub', body: { mode: 0 }, scope: 'organization', role: 'Admin', permission: 'manageSubscriptions', before: clearSubscriptions },
  { method: 'DELETE', path: '/orgs/acme/subscribe/pub', scope: 'organization', role: 'Admin', permission: 'manageSubscriptions', before: pendingRequest('organization_id', 'acme') },

  // projects
  { method: 'GET', path: '/projects/acme', scope: 'organization', role: 'View', permission: null, pinnedElsewhere: 200 },
  { method: 'PUT', path: '/projects/acme', body: (c) => ({ name: `p-${c.seq()}`, repository: 'file:///nonexistent' }), scope: 'organization', role: 'Write', permission: 'createProject' },
  { method: 'GET', path: '/projects/acme/web', scope: 'project', role: 'View', permission: 'viewProject' },
  { method: 'PATCH', path: '/projects/acme/web', body: { description: 'site' }, scope: 'project', role: 'Admin', permission: 'manageProject' },
  {
    method: 'DELETE', path: '/projects/acme/doomed', scope: 'project', role: 'Admin', permission: 'manageProject',
    before: (c) => c.kiln.sql`insert into projects (organization_id, name, repository) values (${c.ids['acme']!}, 'doomed', 'file:///x') on conflict do nothing`,
  },
  { method: 'GET', path: '/projects/acme/web/details', scope: 'project', role: 'View', permission: 'viewProject' },
  { method: 'GET', path: '/projects/acme/web/evaluations', scope: 'project', role: 'View', permission: 'viewProject' },
  { method: 'POST', path: '/projects/acme/web/active', scope: 'project', role: 'Admin', permission: 'manageProject' },
  { method: 'DELETE', path: '/projects/acme/web/active', scope: 'project', role: 'Admin', permission: 'manageProject' },
  { method: 'POST', path: '/projects/acme/web/check-repository', scope: 'project', role: 'Admin', permission: 'manageProject' },

  // project members and invitations
  { method: 'GET', path: '/projects/web/users', scope: 'project', role: 'View', permission: 'viewProject' },
  { method: 'POST', path: '/projects/web/users', body: { user: 'extra', role: 'View' }, scope: 'project', role: 'Admin', permission: 'manageMembers', before: clearProjectInvites('extra') },
  { method: 'PATCH', path: '/projects/web/users', body: { user: 'extra', role: 'Write' }, scope: 'project', role: 'Admin', permission: 'manageMembers', before: ensureProjectMember('extra') },
  { method: 'DELETE', path: '/projects/web/users', body: { user: 'extra' }, scope: 'project', role: 'Admin', permission: 'manageMembers', before: ensureProjectMember('extra') },
  { method: 'GET', path: '/projects/web/invitations', scope: 'project', role: 'Admin', permission: 'manageMembers' },
  { method: 'GET', path: '/user/invitations', scope: 'user', permission: null },
  // SSH login keys (issue 24): anyone signed in lists their own; adding and deleting take a session
  { method: 'GET', path: '/user/ssh-keys', scope: 'user', permission: null },
  {
    method: 'POST', path: '/user/ssh-keys', scope: 'user', permission: null, sessionOnly: true,
    body: () => ({ name: 'matrix', public_key: generateSshKeyPair('matrix').publicKey }),
    before: (c) => c.kiln.sql`delete from user_ssh_keys where user_id = ${c.user.id} and name = 'matrix'`,
  },
  {
    method: 'DELETE', path: '/user/ssh-keys?name=matrix', scope: 'user', permission: null, sessionOnly: true,
    before: (c) => c.kiln.sql`insert into user_ssh_keys (user_id, name, key_type, key_blob, fingerprint)
      values (${c.user.id}, 'matrix', 'ssh-ed25519', ${randomUUID()}, 'SHA256:x') on conflict do nothing`,
  },
  // the caller's own sessions (issue 18, kiln extension): only a session lists or revokes them, never an API key
  { method: 'GET', path: '/user/sessions', scope: 'user', permission: null, sessionOnly: true },
  {
    method: 'DELETE', path: (c) => `/user/sessions/${c.ids[`session-${c.persona}`]!}`, scope: 'user', permission: null, sessionOnly: true,
    before: (c) => c.kiln.sql`insert into sessions (id, user_id, expires_at) values (${c.ids[`session-${c.persona}`]!}, ${c.user.id}, now() + interval '1 day')
      on conflict (id) do update set revoked_at = null`,
  },
  // another account's session is never anyone else's to revoke, a superuser's included: admitted, then not found
  {
    method: 'DELETE', path: (c) => `/user/sessions/${c.ids['extraSession']!}`, scope: 'user', permission: null, sessionOnly: true, ok: 404,
    before: (c) => c.kiln.sql`insert into sessions (id, user_id, expires_at) select ${c.ids['extraSession']!}, id, now() + interval '1 day' from users where username = 'extra'
      on conflict (id) do update set revoked_at = null`,
  },
  {
    method: 'POST', path: (c) => `/invitations/${c.ids[`invite-${c.persona}`]!}/accept`, scope: 'user', permission: null, sessionOnly: true,
    before: async (c) => {
      await c.kiln.sql`delete from invitations where user_id = ${c.user.id}`;
      await c.kiln.sql`delete from project_members where user_id = ${c.user.id}`;
      await c.kiln.sql`insert into invitations (id, project_id, user_id, role, token_hash, expires_at)
        values (${c.ids[`invite-${c.persona}`]!}, ${c.ids['other']!}, ${c.user.id}, 'View', ${randomUUID()}, now() + interval '1 day')`;
    },
  },
  {
    method: 'POST', path: (c) => `/invitations/${c.ids[`invite-${c.persona}`]!}/decline`, scope: 'user', permission: null,
    before: async (c) => {
      await c.kiln.sql`delete from invitations where user_id = ${c.user.id}`;
      await c.kiln.sql`insert into invitations (id, project_id, user_id, role, token_hash, expires_at)
        values (${c.ids[`invite-${c.persona}`]!}, ${c.ids['other']!}, ${c.user.id}, 'View', ${randomUUID()}, now() + interval '1 day')`;
    },
  },
  {
    method: 'DELETE', path: (c) => `/invitations/${c.ids['extraInvite']!}`, scope: 'project', role: 'Admin', permission: 'manageMembers',
    before: async (c) => {
      await clearProjectInvites('extra')(c);
      await c.kiln.sql`insert into invitations (id, project_id, user_id, role, token_hash, expires_at)
        select ${c.ids['extraInvite']!}, ${c.ids['web']!}, id, 'View', ${randomUUID()}, now() + interval '1 day' from users where username = 'extra'`;
    },
  },

  // project subscriptions and worker registrations
  { method: 'GET', path: '/projects/web/subscribe', scope: 'project', role: 'View', permission: 'viewProject' },
  { method: 'POST', path: '/projects/web/subscribe/pub', body: { mode: 1 }, scope: 'project', role: 'Admin', permission: 'manageSubscriptions', before: clearSubscriptions },
  { method: 'DELETE', path: '/projects/web/subscribe/pub', scope: 'project', role: 'Admin', permission: 'manageSubscriptions', before: pendingRequest('project_id', 'web') },
  { method: 'POST', path: '/projects/web/workers', body: { name: 'w' }, scope: 'project', role: 'Admin', permission: 'manageWorkers' },
  { method: 'GET', path: '/projects/web/workers', scope: 'project', role: 'Admin', permission: 'manageWorkers' },
  {
    method: 'DELETE', path: (c) => `/projects/web/workers/${c.ids['registration']!}`, scope: 'project', role: 'Admin', permission: 'manageWorkers',
    before: (c) => c.kiln.sql`insert into worker_registrations (id, project_id, token_hash) values (${c.ids['registration']!}, ${c.ids['web']!}, 'x') on conflict do nothing`,
  },

  // tasks
  { method: 'GET', path: '/tasks/web', scope: 'project', role: 'View', permission: 'viewProject' },
  { method: 'PUT', path: '/tasks/web', body: (c) => ({ name: `t-${c.seq()}` }), scope: 'project', role: 'Write', permission: 'manageTasks' },
  { method: 'GET', path: '/tasks/web/default', scope: 'project', role: 'View', permission: 'viewProject' },
  { method: 'PATCH', path: '/tasks/web/default', body: { build_timeout_secs: 7200 }, scope: 'project', role: 'Write', permission: 'manageTasks' },
  {
    method: 'DELETE', path: '/tasks/web/doomed', scope: 'project', role: 'Write', permission: 'manageTasks',
    before: (c) => c.kiln.sql`insert into tasks (project_id, name) values (${c.ids['web']!}, 'doomed') on conflict do nothing`,
  },
  { method: 'POST', path: '/tasks/web/default/star', scope: 'project', role: 'View', permission: 'viewProject' },
  { method: 'DELETE', path: '/tasks/web/default/star', scope: 'project', role: 'View', permission: 'viewProject' },

  // build servers
  { method: 'GET', path: '/servers/acme', scope: 'organization', role: 'View', permission: 'viewOrg' },
  { method: 'PUT', path: '/servers/acme', body: (c) => ({ name: `s-${c.seq()}`, host: '127.0.0.1', port: 1 }), scope: 'organization', role: 'Admin', permission: 'manageServers' },
  { method: 'GET', path: '/servers/acme/box', scope: 'organization', role: 'View', permission: 'viewOrg' },
  { method: 'PATCH', path: '/servers/acme/box', body: { max_jobs: 2 }, scope: 'organization', role: 'Admin', permission: 'manageServers' },
  {
    method: 'DELETE', path: '/servers/acme/doomed', scope: 'organization', role: 'Admin', permission: 'manageServers',
    before: (c) => c.kiln.sql`insert into servers (organization_id, name, host) values (${c.ids['acme']!}, 'doomed', 'h') on conflict do nothing`,
  },
  { method: 'POST', path: '/servers/acme/box/active', scope: 'organization', role: 'Admin', permission: 'manageServers' },
  { method: 'DELETE', path: '/servers/acme/box/active', scope: 'organization', role: 'Admin', permission: 'manageServers' },
  { method: 'POST', path: '/servers/acme/box/check-connection', scope: 'organization', role: 'Admin', permission: 'manageServers' },

  // caches: members, invitations, subscriptions
  { method: 'GET', path: '/caches/main/users', scope: 'cache', role: 'View', permission: 'viewCache' },
  { method: 'POST', path: '/caches/main/users', body: { user: 'extra', role: 'View' }, scope: 'cache', role: 'Admin', permission: 'manageCacheMembers', before: clearCacheMember('extra') },
  { method: 'PATCH', path: '/caches/main/users', body: { user: 'extra', role: 'Write' }, scope: 'cache', role: 'Admin', permission: 'manageCacheMembers', before: ensureCacheMember('extra') },
  { method: 'DELETE', path: '/caches/main/users', body: { user: 'extra' }, scope: 'cache', role: 'Admin', permission: 'manageCacheMembers', before: ensureCacheMember('extra') },
  { method: 'GET', path: '/caches/main/invitations', scope: 'cache', role: 'Admin', permission: 'manageCacheMembers' },
  { method: 'GET', path: '/caches/main/subscriptions', scope: 'cache', role: 'Admin', permission: 'manageCacheSubscriptions' },
  { method: 'GET', path: '/caches/main/subscription-requests', scope: 'cache', role: 'Admin', permission: 'manageCacheSubscriptions' },
  { method: 'POST', path: (c) => `/caches/main/subscription-requests/${c.ids['request']!}/approve`, scope: 'cache', role: 'Admin', permission: 'manageCacheSubscriptions', before: mainRequest },
  { method: 'DELETE', path: (c) => `/caches/main/subscription-requests/${c.ids['request']!}`, scope: 'cache', role: 'Admin', permission: 'manageCacheSubscriptions', before: mainRequest },

  // caches (issue 5): the cache itself, its NARs and its upstreams. Deleting a cache or a cached NAR
  // is for the cache's owner alone (an Admin member gets 403 owner_only), which the role table does
  // not express: test/http/api/v1/caches.test.ts and cacheNars.test.ts cover those two.
  { method: 'GET', path: '/caches', scope: 'user', permission: null },
  { method: 'PUT', path: '/caches', body: (c) => ({ name: `c-${c.seq()}` }), scope: 'create', permission: 'manageCache' },
  { method: 'GET', path: '/caches/main', scope: 'cache', role: 'View', permission: 'viewCache' },
  // the cache protocol WebSocket (docs/cache-protocol.md), before the rows that deactivate main:
  // reading a private cache takes viewCache as GET {hash}.narinfo does, but an anonymous client gets
  // the close of an unknown cache (404), not a Basic challenge; a public cache is open to anyone but
  // a key pinned elsewhere; failed credentials (expired, outside allowed_ips) on the private cache
  // get the unknown cache's close too, so that junk tokens do not tell private from unknown
  {
    method: 'GET', path: '/cache/main/proto', scope: 'cache', role: 'View', permission: 'viewCache', cacheSocket: true,
    special: (_p, credential) => (credential === 'none' || credential === 'expiredKey' || credential === 'keyOutsideAllowedIps' ? 404 : undefined),
  },
  {
    method: 'GET', path: '/cache/pub/proto', scope: 'cache', permission: null, cacheSocket: true,
    special: (_p, credential) => ({ expiredKey: 401, keyOutsideAllowedIps: 403, keyPinnedElsewhere: 404 } as Partial<Record<Credential, number>>)[credential] ?? 200,
  },
  { method: 'PATCH', path: '/caches/main', body: { description: 'builds' }, scope: 'cache', role: 'Admin', permission: 'manageCache' },
  { method: 'POST', path: '/caches/main/active', scope: 'cache', role: 'Admin', permission: 'manageCache' },
  { method: 'DELETE', path: '/caches/main/active', scope: 'cache', role: 'Admin', permission: 'manageCache' },
  { method: 'GET', path: '/caches/main/key', scope: 'cache', role: 'View', permission: 'viewCache' },
  { method: 'GET', path: '/caches/main/keys', scope: 'cache', role: 'View', permission: 'viewCache' },
  {
    method: 'POST', path: '/caches/main/key/rotate', body: { overlap_hours: 1 }, scope: 'cache', role: 'Admin', permission: 'manageCache',
    // each allowed credential rotates: the last rotation's time goes, or cache.keyRotationMinIntervalSecs answers 409
    before: async (c) => {
      await c.kiln.sql`update caches set key_rotated_at = null where id = ${c.ids['main']!}`;
    },
  },
  {
    // an emergency re-rotation inside the interval (docs/caches.md): the owner's (the Admin persona
    // is made the owner here; other admins get owner_only, keyRotationForce.test.ts), or any
    // superuser's with superuser powers (a session, or an unpinned key holding admin)
    method: 'POST', path: '/caches/main/key/rotate', body: { force: true, overlap_hours: 1 }, scope: 'cache', role: 'Admin', permission: 'manageCache',
    before: async (c) => {
      await c.kiln.sql`update caches set key_rotated_at = now(), owner_id = (select id from users where username = 'admin') where id = ${c.ids['main']!}`;
    },
    special: (persona, credential) => (persona === 'superuser' && (credential === 'session' || credential === 'keyWithPermission' || credential === 'keyWithoutPermission') ? 200 : undefined),
  },
  { method: 'GET', path: '/caches/main/nars', scope: 'cache', role: 'View', permission: 'viewCache' },
  {
    method: 'GET', path: `/caches/main/nars/${'0'.repeat(32)}`, scope: 'cache', role: 'View', permission: 'viewCache',
    before: ensureMatrixPath,
  },
  { method: 'GET', path: '/caches/main/stats', scope: 'cache', role: 'View', permission: 'viewCache' },
  // pins (issue 20, docs/gc.md): whoever may upload may pin and unpin; whoever sees the cache lists them
  { method: 'GET', path: '/caches/main/pins', scope: 'cache', role: 'View', permission: 'viewCache' },
  { method: 'PUT', path: `/caches/main/pins/${'0'.repeat(32)}`, body: {}, scope: 'cache', role: 'Write', permission: 'writeStore', before: ensureMatrixPath },
  {
    method: 'DELETE', path: `/caches/main/pins/${'0'.repeat(32)}`, scope: 'cache', role: 'Write', permission: 'writeStore',
    before: async (c) => {
      await ensureMatrixPath(c);
      await c.kiln.sql`insert into cache_pins (cache_id, hash_part) values (${c.ids['main']!}, ${'0'.repeat(32)}) on conflict do nothing`;
    },
  },
  { method: 'GET', path: '/caches/main/upstreams', scope: 'cache', role: 'View', permission: 'viewCache' },
  // stored metrics (issue 21): a cache's traffic series for whoever may see it; the cache board for any signed-in account (it lists only the caches each may see)
  { method: 'GET', path: '/caches/main/metrics', scope: 'cache', role: 'View', permission: 'viewCache' },
  { method: 'GET', path: '/board/cache', scope: 'user', permission: null },
  // the other stored series (issue 21): a worker's samples (manageWorkers on a project it connected for, or a superuser), a project's series (viewProject)
  { method: 'GET', path: `/workers/${MATRIX_WORKER}/samples`, scope: 'project', role: 'Admin', permission: 'manageWorkers', superuserReads: true, before: ensureMatrixWorker },
  { method: 'GET', path: `/workers/${MATRIX_WORKER}/rollups`, scope: 'project', role: 'Admin', permission: 'manageWorkers', superuserReads: true, before: ensureMatrixWorker },
  { method: 'GET', path: '/projects/acme/web/metrics?period=day', scope: 'project', role: 'View', permission: 'viewProject' },
  {
    method: 'PUT', path: '/caches/main/upstreams', scope: 'cache', role: 'Admin', permission: 'manageCache',
    body: { url: 'http://upstream.example/cache', public_key: `upstream-1:${Buffer.alloc(32, 3).toString('base64')}` },
  },
  {
    method: 'DELETE', path: '/caches/main/upstreams/0e0e0e0e-0000-4000-8000-000000000001', scope: 'cache', role: 'Admin', permission: 'manageCache',
    before: (c) => c.kiln.sql`insert into cache_upstreams (id, cache_id, url, public_key)
      values ('0e0e0e0e-0000-4000-8000-000000000001', ${c.ids['main']!}, 'http://doomed.example', ${`doomed-1:${Buffer.alloc(32, 4).toString('base64')}`})
      on conflict do nothing`,
  },

  // events (issue 6): the catalog, webhooks per scope, task actions. The live WebSockets are rows
  // too (socket: true, below); test/http/live/liveSocketAuthorization.test.ts asserts each refusal's
  // exact form (HTTP status or close code) and what an admitted socket receives.
  { method: 'GET', path: '/events/catalog', scope: 'user', permission: null },
  ...webhookRows('/projects/web/webhooks', '0e0e0e0e-0000-4000-8000-0000000000b1', { scope: 'project', role: 'Admin', permission: 'manageWebhooks' }, 'project_id', 'web'),
  ...webhookRows('/caches/main/webhooks', '0e0e0e0e-0000-4000-8000-0000000000b2', { scope: 'cache', role: 'Admin', permission: 'manageCacheWebhooks' }, 'cache_id', 'main'),
  ...webhookRows('/admin/webhooks', '0e0e0e0e-0000-4000-8000-0000000000b3', { scope: 'superuser', permission: 'admin' }, null, null),
  { method: 'GET', path: '/tasks/web/default/actions', scope: 'project', role: 'Write', permission: 'manageTasks' },
  { method: 'PUT', path: '/tasks/web/default/actions', body: (c) => ({ kind: 'send_mail', name: `a-${c.seq()}`, to: ['ops@example.test'] }), scope: 'project', role: 'Write', permission: 'manageTasks' },
  { method: 'GET', path: `/tasks/web/default/actions/${TASK_ACTION}`, scope: 'project', role: 'Write', permission: 'manageTasks', before: ensureTaskAction },
  { method: 'PATCH', path: `/tasks/web/default/actions/${TASK_ACTION}`, body: { events: ['build.*'] }, scope: 'project', role: 'Write', permission: 'manageTasks', before: ensureTaskAction },
  { method: 'POST', path: `/tasks/web/default/actions/${TASK_ACTION}/rotate-secret`, scope: 'project', role: 'Write', permission: 'manageTasks', before: ensureTaskAction },
  { method: 'GET', path: `/tasks/web/default/actions/${TASK_ACTION}/deliveries`, scope: 'project', role: 'Write', permission: 'manageTasks', before: ensureTaskAction },
  { method: 'DELETE', path: `/tasks/web/default/actions/${TASK_ACTION}`, scope: 'project', role: 'Write', permission: 'manageTasks', before: ensureTaskAction },

  // build data (issue 7): an evaluation of web with one completed build, seeded below; authorised like GET /evals/{id}
  { method: 'POST', path: `/evals/${MATRIX_EVALUATION}/builds`, scope: 'project', role: 'View', permission: 'viewProject' },
  { method: 'GET', path: `/evals/${MATRIX_EVALUATION}/builds`, scope: 'project', role: 'View', permission: 'viewProject' },
  // an evaluation's builds a page at a time (issue 18): authorised like GET /evals/{id}/builds
  { method: 'GET', path: `/evals/${MATRIX_EVALUATION}/builds/page?per_page=10&status=completed`, scope: 'project', role: 'View', permission: 'viewProject' },
  { method: 'GET', path: `/evals/${MATRIX_EVALUATION}/closure`, scope: 'project', role: 'View', permission: 'viewProject' },
  { method: 'GET', path: `/evals/${MATRIX_EVALUATION}/runtime-closure`, scope: 'project', role: 'View', permission: 'viewProject' },
  // abort a running evaluation, restart a finished one (issue 23: a new evaluation, 200 with its id)
  { method: 'POST', path: `/evals/${MATRIX_ACTION_EVALUATION}`, body: { method: 'abort' }, scope: 'project', role: 'Write', permission: 'triggerEvaluation', before: resetActionEvaluation('queued') },
  { method: 'POST', path: `/evals/${MATRIX_ACTION_EVALUATION}`, body: { method: 'restart' }, scope: 'project', role: 'Write', permission: 'triggerEvaluation', before: resetActionEvaluation('failed') },
  { method: 'POST', path: `/builds/${MATRIX_ACTION_BUILD}`, body: { method: 'abort' }, scope: 'project', role: 'Write', permission: 'triggerEvaluation', before: resetActionBuild('queued') },
  { method: 'POST', path: `/builds/${MATRIX_ACTION_BUILD}`, body: { method: 'restart' }, scope: 'project', role: 'Write', permission: 'triggerEvaluation', before: resetActionBuild('failed') },
  { method: 'POST', path: `/builds/${MATRIX_BUILD}/log`, scope: 'project', role: 'View', permission: 'viewProject' },
  { method: 'GET', path: `/builds/${MATRIX_BUILD}/graph`, scope: 'project', role: 'View', permission: 'viewProject' },
  { method: 'GET', path: `/builds/${MATRIX_BUILD}/downloads`, scope: 'project', role: 'View', permission: 'viewProject' },
  { method: 'GET', path: `/builds/${MATRIX_BUILD}/closure`, scope: 'project', role: 'View', permission: 'viewProject' },
  { method: 'GET', path: `/builds/${MATRIX_BUILD}/runtime-closure`, scope: 'project', role: 'View', permission: 'viewProject' },
  // direct builds, source uploads and commits (issue 7, docs/builds.md "Direct builds")
  { method: 'POST', path: '/builds', scope: 'project', role: 'Write', permission: 'triggerEvaluation', before: ensureDirectCache, raw: () => multipartBody([['project', 'acme/web'], ['closure', DIRECT_CLOSURE]]) },
  { method: 'GET', path: '/builds/direct/recent', scope: 'user', permission: null },
  { method: 'POST', path: '/build-requests/source?project=acme/web', scope: 'project', role: 'Write', permission: 'triggerEvaluation', raw: () => ({ body: SOURCE_TARBALL, contentType: 'application/gzip' }) },
  { method: 'POST', path: `/build-requests/source/${MATRIX_SOURCE_UPLOAD}/evaluate`, body: {}, scope: 'project', role: 'Write', permission: 'triggerEvaluation', before: ensureOwnSourceUpload },
  { method: 'GET', path: `/commits/${MATRIX_COMMIT}`, scope: 'project', role: 'View', permission: 'viewProject', before: ensureCommit },

  // superuser powers (issue 15): a superuser's session, or its unpinned key holding admin
  { method: 'GET', path: '/admin/actors', scope: 'superuser', permission: 'admin' },
  // garbage collection (issue 20, docs/gc.md): request a pass or a deep round, read the runs
  { method: 'POST', path: '/admin/gc', body: {}, scope: 'superuser', permission: 'admin', ok: 202 },
  { method: 'GET', path: '/admin/gc', scope: 'superuser', permission: 'admin' },
  {
    method: 'GET', path: '/admin/gc/990001', scope: 'superuser', permission: 'admin',
    before: (c) => c.kiln.sql`insert into gc_runs (id, kind) overriding system value values (990001, 'pass') on conflict do nothing`,
  },
  // accounts and sessions of the instance (issue 18)
  { method: 'GET', path: '/admin/users?per_page=5&search=a', scope: 'superuser', permission: 'admin' },
  { method: 'GET', path: '/admin/sessions?state=all', scope: 'superuser', permission: 'admin' },
  { method: 'GET', path: '/workers', scope: 'superuser', permission: 'admin' },
  { method: 'GET', path: '/metrics/instance', scope: 'superuser', permission: 'admin' },
  { method: 'GET', path: '/metrics/phases?period=day', scope: 'superuser', permission: 'admin' },
  { method: 'GET', path: '/metrics/instance/rollups', scope: 'superuser', permission: 'admin' },
  { method: 'GET', path: '/metrics/events', scope: 'superuser', permission: 'admin', socket: true },
  { method: 'GET', path: '/metrics/events?events=build.*', scope: 'superuser', permission: 'admin', socket: true },
  { method: 'GET', path: '/board/live', scope: 'superuser', permission: 'admin', socket: true },
  { method: 'GET', path: '/admin/actors/live', scope: 'superuser', permission: 'admin', socket: true },
  // the Prometheus scrape (issue 21): its own bearer token only, a superuser's included
  { method: 'GET', path: '/metrics', scope: 'scrapeToken', permission: null },
  // the Git host application's webhooks (issue 19): unsigned, every caller is refused, a superuser included
  { method: 'POST', path: '/hooks/github', body: { zen: 'hi' }, scope: 'hookSignature', permission: null },
  // the OpenAPI description (issue 25): public, no credential needed or checked
  { method: 'GET', path: '/openapi.json', scope: 'public', permission: null },
  // the shared evaluation cache (docs/eval-cache.md): an evaluation job's capability only, of an evaluation that runs
  { method: 'POST', path: `/eval-inputs/${MATRIX_RUNNING_EVALUATION}/query`, body: { narHashes: ['a'.repeat(64)] }, scope: 'capability', permission: null, atRoot: true, before: ensureRunningEvaluation },
  { method: 'GET', path: `/eval-inputs/${MATRIX_RUNNING_EVALUATION}/${'a'.repeat(64)}`, scope: 'capability', permission: null, atRoot: true, before: ensureRunningEvaluation },
  {
    method: 'PUT', path: `/eval-inputs/${MATRIX_RUNNING_EVALUATION}/${'a'.repeat(64)}`, scope: 'capability', permission: null, atRoot: true, before: ensureRunningEvaluation,
    raw: () => ({ body: Buffer.from('nix-archive-1'), contentType: 'application/x-nix-nar' }),
  },
  // the live paths of a project (issue 16): authorised like GET /tasks/…, /evals/{id}, /builds/{id}
  { method: 'GET', path: '/tasks/web/default/live', scope: 'project', role: 'View', permission: 'viewProject', socket: true },
  { method: 'GET', path: `/evals/${MATRIX_EVALUATION}/live`, scope: 'project', role: 'View', permission: 'viewProject', socket: true },
  { method: 'GET', path: `/builds/${MATRIX_BUILD}/live`, scope: 'project', role: 'View', permission: 'viewProject', socket: true },
  // the cache board admits every signed-in caller and sends what each can view (liveSocketAuthorization.test.ts)
  { method: 'GET', path: '/board/cache/live', scope: 'user', permission: null, socket: true },
];

/** Opens a live socket as the matrix calls an endpoint: 200 when it opens, else the refusal's status. */
async function openSocket(kiln: TestKiln, path: string, token: string | undefined): Promise<{ status: number; message: unknown }> {
  try {
    (await openLive(kiln, path, token)).close();
    return { status: 200, message: 'opened' };
  } catch (e) {
    const refusal = e as LiveRefusal;
    if (typeof refusal.status !== 'number') throw e;
    return { status: refusal.status, message: refusal.body };
  }
}

/** Opens the cache protocol WebSocket at `path` (/cache/{cache}/proto) as the matrix calls an endpoint. */
async function openCacheSocket(kiln: TestKiln, path: string, token: string | undefined): Promise<{ status: number; message: unknown }> {
  const cache = /^\/cache\/([^/]+)\/proto$/.exec(path)![1]!;
  try {
    (await openCacheProto(kiln, cache, token ? { authorization: `Bearer ${token}` } : {})).close();
    return { status: 200, message: 'ready' };
  } catch (e) {
    const refusal = e as CacheProtoRefusal;
    if (refusal.status !== null && refusal.status !== undefined) return { status: refusal.status, message: refusal.body };
    if (typeof refusal.closeCode !== 'number') throw e;
    return { status: refusal.closeCode - 4000, message: refusal.closeReason };
  }
}

interface Keys {
  all: string;
  without: Map<Permission, string>;
  pinnedProject: string;
  pinnedCache: string;
  outsideIps: string;
  expired: string;
}

async function createKey(kiln: TestKiln, user: TestAccount, body: Record<string, unknown>): Promise<string> {
  const res = await kiln.api<{ secret: string }>('POST', '/user/keys', { token: user.token, body });
  if (res.status !== 200) throw new Error(`creating key ${JSON.stringify(body)} for ${user.username}: ${res.status} ${JSON.stringify(res.message)}`);
  return res.message.secret;
}

/** Runs the rows of part `part` (0-based) of `parts` contiguous slices of the table. */
export function authorizationMatrix(part: number, parts: number): void {
  const rows = endpoints.slice(Math.floor((part * endpoints.length) / parts), Math.floor(((part + 1) * endpoints.length) / parts));
  t.test(`authorization matrix, part ${part + 1} of ${parts}`, async (t) => {
    const scrapeDir = mkdtempSync(join(tmpdir(), 'kiln-matrix-'));
    t.teardown(() => rmSync(scrapeDir, { recursive: true, force: true }));
    writeFileSync(join(scrapeDir, 'scrape-token'), 'matrix-scrape-token');
    writeFileSync(join(scrapeDir, 'hook-secret'), 'matrix-hook-secret');
    writeFileSync(join(scrapeDir, 'app-key.pem'), generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs1', format: 'pem' }));
    const kiln = await startTestKiln(t, {
      'metrics.tokenFile': join(scrapeDir, 'scrape-token'),
      'gitHostApp.enable': true, 'gitHostApp.id': 4242,
      'gitHostApp.privateKeyFile': join(scrapeDir, 'app-key.pem'), 'gitHostApp.webhookSecretFile': join(scrapeDir, 'hook-secret'),
    });
    const superuser = await signUp(kiln, 'root'); // the first account is the superuser
    const cacheOwner = await signUp(kiln, 'owner');
    const users: Record<Persona, TestAccount> = {
      superuser,
      nonMember: await signUp(kiln, 'stranger'),
      View: await signUp(kiln, 'view'),
      Write: await signUp(kiln, 'write'),
      Admin: await signUp(kiln, 'admin'),
    };
    await signUp(kiln, 'extra');

    // acme (members View/Write/Admin) with projects web and other; server box; private cache main
    // (same roles), public cache pub (owner's), cache elsewhere for pinned keys.
    const org = await kiln.api<{ id: string }>('PUT', '/orgs', { token: cacheOwner.token, body: { name: 'acme' } });
    const ids: Record<string, string> = { acme: org.message.id, registration: randomUUID(), request: randomUUID(), extraInvite: randomUUID() };
    for (const p of personas) ids[`invite-${p}`] = randomUUID();
    for (const p of personas) ids[`session-${p}`] = randomUUID();
    ids['extraSession'] = randomUUID();
    await kiln.sql`delete from organization_members`;
    await membersOf({ kiln } as Ctx, 'organization_members', ids['acme']!);
    for (const name of ['web', 'other']) {
      const [row] = await kiln.sql<{ id: string }[]>`
        insert into projects (organization_id, name, repository) values (${ids['acme']!}, ${name}, 'file:///nonexistent') returning id`;
      ids[name] = row!.id;
      await kiln.sql`insert into tasks (project_id, name) values (${row!.id}, 'default')`;
    }
    await kiln.sql`insert into servers (organization_id, name, host, port) values (${ids['acme']!}, 'box', '127.0.0.1', 1)`;
    for (const [name, isPublic] of [['main', false], ['pub', true], ['elsewhere', false]] as const) {
      const [row] = await kiln.sql<{ id: string }[]>`
        insert into caches (name, public, owner_id, key_name, public_key, secret_key)
        values (${name}, ${isPublic}, ${cacheOwner.id}, ${`test-${name}-1`}, ${Buffer.alloc(32, 1)}, ${Buffer.alloc(64, 2)}) returning id`;
      ids[name] = row!.id;
    }
    for (const [username, role] of [['view', 'View'], ['write', 'Write'], ['admin', 'Admin']] as const) {
      await kiln.sql`insert into cache_members (cache_id, user_id, role) select ${ids['main']!}, id, ${role} from users where username = ${username}`;
    }

    await seedBuild(kiln, ids['web']!);

    const keys = new Map<Persona, Keys>();
    for (const persona of personas) {
      const user = users[persona];
      const all = [...permissionNames];
      const expired = await createKey(kiln, user, { name: 'expired', permissions: all, expires_in_days: 1 });
      await kiln.sql`update api_keys set expires_at = now() - interval '1 minute' where user_id = ${user.id} and name = 'expired'`;
      keys.set(persona, {
        all: await createKey(kiln, user, { name: 'all', permissions: all }),
        without: new Map(),
        pinnedProject: await createKey(kiln, user, { name: 'pinned-project', permissions: all, project: 'acme/other' }),
        pinnedCache: await createKey(kiln, user, { name: 'pinned-cache', permissions: all, cache: 'elsewhere' }),
        outsideIps: await createKey(kiln, user, { name: 'outside-ips', permissions: all, allowed_ips: ['192.0.2.0/24'] }),
        expired,
      });
    }

    async function tokenFor(persona: Persona, credential: Credential, e: Endpoint): Promise<string | undefined> {
      const k = keys.get(persona)!;
      switch (credential) {
        case 'none': return undefined;
        case 'session': return users[persona].token;
        case 'keyWithPermission': return k.all;
        case 'keyWithoutPermission': {
          if (e.permission === null) return k.all;
          let secret = k.without.get(e.permission);
          if (!secret) {
            const rest = permissionNames.filter((p) => p !== e.permission);
            secret = await createKey(kiln, users[persona], { name: `without-${e.permission}`, permissions: rest });
            k.without.set(e.permission, secret);
          }
          return secret;
        }
        case 'keyPinnedElsewhere': return e.scope === 'cache' ? k.pinnedCache : k.pinnedProject;
        case 'keyOutsideAllowedIps': return k.outsideIps;
        case 'expiredKey': return k.expired;
      }
    }

    let sequence = 0;
    for (const e of rows) {
      const label = `${e.method} ${typeof e.path === 'string' ? e.path : e.path({ persona: 'Admin', ids } as Ctx).replace(/[0-9a-f-]{36}/, '{id}')}`;
      t.test(label, async (t) => {
        for (const persona of personas) {
          for (const credential of credentials) {
            const ctx: Ctx = { kiln, persona, user: users[persona], ids, seq: () => ++sequence };
            await e.before?.(ctx);
            const path = typeof e.path === 'string' ? e.path : e.path(ctx);
            const body = typeof e.body === 'function' ? e.body(ctx) : e.body;
            const token = await tokenFor(persona, credential, e);
            const raw = e.raw?.();
            const res = e.cacheSocket
              ? await openCacheSocket(kiln, path, token)
              : e.socket
              ? await openSocket(kiln, path, token)
              : raw || e.atRoot
              ? await fetch(`${kiln.url}${e.atRoot ? '' : '/api/v1'}${path}`, {
                method: e.method, body: raw?.body ?? (body === undefined ? undefined : JSON.stringify(body)),
                headers: { 'content-type': raw?.contentType ?? 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
              }).then(async (r) => ({ status: r.status, message: ((await r.json()) as { message: unknown }).message }))
              : await kiln.api(e.method, path, { ...(token ? { token } : {}), ...(body === undefined ? {} : { body }) });
            const want = expectedStatus(e, persona, credential);
            t.equal(res.status, want, `${persona} × ${credential}: ${want}${res.status === want ? '' : ` (got ${res.status}: ${JSON.stringify(res.message).slice(0, 160)})`}`);
          }
        }
      });
    }
  });
}
