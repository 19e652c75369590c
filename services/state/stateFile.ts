// Applying the state file at start, in one transaction, idempotently: applying the same file
// twice leaves the same database (keys are generated only for new rows, a password hash is kept
// while it still matches its file, expiry counts from the key's creation). Declared rows are
// marked state_managed; the API then refuses to change them. Rows a previous file declared and
// this one does not are released (state_managed = false), not deleted, except memberships,
// subscriptions and API keys, which exist only because a file said so.
import type { TransactionSql } from 'postgres';
import type { Role, SubscriptionMode } from '../../protocol/index.js';
import { cacheIdNamed, declareCache, insertCache, releaseUndeclaredCaches } from '../../storage/index.js';
import type { AccessDeps } from '../access/index.js';
import { hashApiKeySecret } from '../accounts/index.js';
import { generateCacheKey, keyHost } from '../caches/index.js';
import { hashPassword, verifyPassword } from '../accounts/index.js';
import { vetRepository } from '../projects/index.js';
import { generateSshKeyPair } from '../organizations/index.js';
import { readSecretText, type StateFile } from './stateFileSchema.js';
import { DEFAULT_TASK } from '../projects/index.js';

const lower = (s: string) => s.toLowerCase();

export interface StateApplied {
  users: number;
  organizations: number;
  projects: number;
  caches: number;
  memberships: number;
  subscriptions: number;
  api_keys: number;
}

export async function applyStateFile(deps: AccessDeps, state: StateFile, read: (file: string) => string = readSecretText): Promise<StateApplied> {
  const { sql, config, secretBox, log } = deps;
  // The state file is the operator's, but its projects run on the same workers as every tenant's: same rule.
  for (const p of state.projects) {
    const min = config['projects.minPollIntervalSecs'];
    if (p.poll_interval_secs !== null && p.poll_interval_secs < min) {
      throw new Error(`state file, project ${p.organization}/${p.name}: poll_interval_secs: at least ${min} on this instance (projects.minPollIntervalSecs)`);
    }
    await vetRepository(p.repository, { allowLocal: config['projects.allowLocalRepositories'] }).catch((e: unknown) => {
      throw new Error(`state file, project ${p.organization}/${p.name}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    });
  }
  const applied = await sql.begin(async (tx) => {
    // One apply at a time, across every process of the installation.
    await tx`select pg_advisory_xact_lock(hashtextextended('kiln state file', 0))`;
    const userIds = await applyUsers(tx, state, read);
    const orgIds = await applyOrganizations(tx, state, secretBox);
    const projectIds = await applyProjects(tx, state, orgIds);
    const cacheIds = await applyCaches(tx, state, userIds, secretBox, keyHost(config));
    await applyMemberships(tx, state, userIds, orgIds, projectIds, cacheIds);
    await applySubscriptions(tx, state, orgIds, projectIds, cacheIds);
    await applyApiKeys(tx, state, userIds, projectIds, cacheIds, read);
    return {
      users: userIds.size, organizations: orgIds.size, projects: projectIds.size, caches: cacheIds.size,
      memberships: state.memberships.length, subscriptions: state.subscriptions.length, api_keys: state.api_keys.length,
    };
  });
  log.info(applied, 'state file applied');
  return applied;
}

async function applyUsers(tx: TransactionSql, state: StateFile, read: (file: string) => string): Promise<Map<string, string>> {
  const ids = new Map<string, string>();
  for (const u of state.users) {
    const [existing] = await tx<{ id: string; password_hash: string | null }[]>`select id, password_hash from users where username = ${u.username}`;
    let hash = existing?.password_hash ?? null;
    if (u.password_file !== undefined) {
      const password = read(u.password_file);
      if (!(await verifyPassword(hash, password))) hash = await hashPassword(password);
    }
    const [row] = existing
      ? await tx<{ id: string }[]>`
          update users set name = coalesce(${u.name ?? null}, name), email = coalesce(${u.email ?? null}, email),
                 password_hash = ${hash}, superuser = ${u.superuser}, state_managed = true
          where id = ${existing.id} returning id`
      : await tx<{ id: string }[]>`
          insert into users (username, name, email, password_hash, superuser, state_managed)
          values (${u.username}, ${u.name ?? ''}, ${u.email ?? null}, ${hash}, ${u.superuser}, true) returning id`;
    ids.set(lower(u.username), row!.id);
  }
  await tx`update users set state_managed = false where state_managed and not (id = any(${[...ids.values()]}::uuid[]))`;
  return ids;
}

async function applyOrganizations(tx: TransactionSql, state: StateFile, box: AccessDeps['secretBox']): Promise<Map<string, string>> {
  const ids = new Map<string, string>();
  for (const o of state.organizations) {
    const [existing] = await tx<{ id: string }[]>`select id from organizations where name = ${o.name}`;
    let id = existing?.id;
    if (id) {
      await tx`update organizations set display_name = ${o.display_name}, description = ${o.description}, state_managed = true where id = ${id}`;
    } else {
      const keys = generateSshKeyPair(`kiln@${o.name}`);
      const [row] = await tx<{ id: string }[]>`
        insert into organizations (name, display_name, description, ssh_public_key, ssh_private_key, state_managed)
        values (${o.name}, ${o.display_name}, ${o.description}, ${keys.publicKey}, ${box.seal(Buffer.from(keys.privateKey))}, true)
        returning id`;
      id = row!.id;
    }
    ids.set(lower(o.name), id);
  }
  await tx`update organizations set state_managed = false where state_managed and not (id = any(${[...ids.values()]}::uuid[]))`;
  return ids;
}

async function applyProjects(tx: TransactionSql, state: StateFile, orgIds: Map<string, string>): Promise<Map<string, string>> {
  const ids = new Map<string, string>();
  for (const p of state.projects) {
    const orgId = orgIds.get(lower(p.organization))!;
    const [old] = await tx<{ repository: string }[]>`select repository from projects where organization_id = ${orgId} and name = ${p.name}`;
    const [row] = await tx<{ id: string }[]>`
      insert into projects (organization_id, name, display_name, description, repository, wildcard, default_branch, active, state_managed,
                            poll_interval_secs, next_poll_at, cancel_superseded, requires_approval)
      values (${orgId}, ${p.name}, ${p.display_name}, ${p.description}, ${p.repository}, ${p.wildcard}, ${p.default_branch}, ${p.active}, true,
              ${p.poll_interval_secs}, ${p.poll_interval_secs === null ? null : tx`now()`}, ${p.cancel_superseded}, ${p.requires_approval})
      on conflict (organization_id, name) do update set
        display_name = excluded.display_name, description = excluded.description, repository = excluded.repository,
        wildcard = excluded.wildcard, default_branch = excluded.default_branch, active = excluded.active, state_managed = true,
        -- a changed interval polls from now; an unchanged one keeps its schedule
        next_poll_at = case when projects.poll_interval_secs is not distinct from excluded.poll_interval_secs then projects.next_poll_at else excluded.next_poll_at end,
        poll_interval_secs = excluded.poll_interval_secs, cancel_superseded = excluded.cancel_superseded, requires_approval = excluded.requires_approval
      returning id`;
    // a new repository's heads are not the old one's (as for PATCH): the next poll starts from what it finds
    if (old && old.repository !== p.repository) await tx`delete from project_polled_heads where project_id = ${row!.id}`;
    await tx`insert into tasks (project_id, name) values (${row!.id}, ${DEFAULT_TASK}) on conflict do nothing`;
    ids.set(lower(`${p.organization}/${p.name}`), row!.id);
  }
  await tx`update projects set state_managed = false where state_managed and not (id = any(${[...ids.values()]}::uuid[]))`;
  return ids;
}

async function applyCaches(
  tx: TransactionSql, state: StateFile, userIds: Map<string, string>, box: AccessDeps['secretBox'], host: string,
): Promise<Map<string, string>> {
  const ids = new Map<string, string>();
  for (const c of state.caches) {
    const owner = c.owner === undefined ? null : userIds.get(lower(c.owner))!;
    const settings = { description: c.description, public: c.public, priority: c.priority, owner_id: owner };
    let id = await cacheIdNamed(tx, c.name);
    if (id) await declareCache(tx, id, settings);
    else id = await insertCache(tx, { name: c.name, ...settings, ...generateCacheKey(box, host, c.name) }, true);
    ids.set(lower(c.name), id);
  }
  await releaseUndeclaredCaches(tx, [...ids.values()]);
  return ids;
}

/** The member list of every declared organization, project and cache becomes exactly the declared one. */
async function applyMemberships(
  tx: TransactionSql, state: StateFile, users: Map<string, string>,
  orgs: Map<string, string>, projects: Map<string, string>, caches: Map<string, string>,
): Promise<void> {
  const scopes = [
    { table: 'organization_members', key: 'organization_id', ids: orgs, of: (m: StateFile['memberships'][number]) => m.organization },
    { table: 'project_members', key: 'project_id', ids: projects, of: (m: StateFile['memberships'][number]) => m.project },
    { table: 'cache_members', key: 'cache_id', ids: caches, of: (m: StateFile['memberships'][number]) => m.cache },
  ];
  for (const scope of scopes) {
    const wanted = new Map<string, { targetId: string; userId: string; role: Role }>();
    for (const m of state.memberships) {
      const name = scope.of(m);
      if (name === undefined) continue;
      const targetId = scope.ids.get(lower(name))!;
      const userId = users.get(lower(m.user))!;
      wanted.set(`${targetId}/${userId}`, { targetId, userId, role: m.role });
    }
    const targets = [...scope.ids.values()];
    const current = await tx<{ target: string; user_id: string; role: Role }[]>`
      select ${tx(scope.key)} as target, user_id, role from ${tx(scope.table)} where ${tx(scope.key)} = any(${targets}::uuid[])`;
    for (const row of current) {
      const want = wanted.get(`${row.target}/${row.user_id}`);
      if (!want) await tx`delete from ${tx(scope.table)} where ${tx(scope.key)} = ${row.target} and user_id = ${row.user_id}`;
      else if (want.role !== row.role) await tx`update ${tx(scope.table)} set role = ${want.role} where ${tx(scope.key)} = ${row.target} and user_id = ${row.user_id}`;
    }
    const present = new Set(current.map((r) => `${r.target}/${r.user_id}`));
    for (const [k, m] of wanted) {
      if (!present.has(k)) await tx`insert into ${tx(scope.table)} (${tx(scope.key)}, user_id, role) values (${m.targetId}, ${m.userId}, ${m.role})`;
    }
    // Invitations to declared targets can never be accepted into a state-managed member list.
    if (scope.key !== 'organization_id') await tx`delete from invitations where ${tx(scope.key)} = any(${targets}::uuid[])`;
  }
}

async function applySubscriptions(
  tx: TransactionSql, state: StateFile, orgs: Map<string, string>, projects: Map<string, string>, caches: Map<string, string>,
): Promise<void> {
  const kept: string[] = [];
  for (const s of state.subscriptions) {
    const cacheId = caches.get(lower(s.cache))!;
    const column = s.project !== undefined ? 'project_id' : 'organization_id';
    const subscriberId = s.project !== undefined ? projects.get(lower(s.project))! : orgs.get(lower(s.organization!))!;
    const mode: SubscriptionMode = s.mode;
    const [row] = await tx<{ id: string }[]>`
      insert into subscriptions (${tx(column)}, cache_id, mode, state_managed) values (${subscriberId}, ${cacheId}, ${mode}, true)
      on conflict (${tx(column)}, cache_id) where ${tx(column)} is not null do update set mode = excluded.mode, state_managed = true
      returning id`;
    await tx`delete from subscription_requests where ${tx(column)} = ${subscriberId} and cache_id = ${cacheId}`;
    kept.push(row!.id);
  }
  await tx`delete from subscriptions where state_managed and not (id = any(${kept}::uuid[]))`;
}

async function applyApiKeys(
  tx: TransactionSql, state: StateFile, users: Map<string, string>, projects: Map<string, string>, caches: Map<string, string>,
  read: (file: string) => string,
): Promise<void> {
  const kept: string[] = [];
  for (const k of state.api_keys) {
    const secret = read(k.secret_file);
    const userId = users.get(lower(k.user))!;
    const projectId = k.project === undefined ? null : projects.get(lower(k.project))!;
    const cacheId = k.cache === undefined ? null : caches.get(lower(k.cache))!;
    const permissions = [...new Set(k.permissions)].sort();
    const days = k.expires_in_days ?? null;
    const [row] = await tx<{ id: string }[]>`
      insert into api_keys (user_id, name, secret_hash, secret_prefix, permissions, project_id, cache_id, allowed_ips, expires_at, state_managed)
      values (${userId}, ${k.name}, ${hashApiKeySecret(secret)}, ${secret.slice(0, 8)}, ${permissions}, ${projectId}, ${cacheId},
              (select coalesce(array_agg(network(a::inet)), '{}') from unnest(${k.allowed_ips}::text[]) a),
              case when ${days}::int is null then null else now() + make_interval(days => ${days}::int) end, true)
      on conflict (user_id, name) do update set
        secret_hash = excluded.secret_hash, secret_prefix = excluded.secret_prefix, permissions = excluded.permissions,
        project_id = excluded.project_id, cache_id = excluded.cache_id, allowed_ips = excluded.allowed_ips,
        expires_at = case when ${days}::int is null then null else api_keys.created_at + make_interval(days => ${days}::int) end,
        state_managed = true
      returning id`;
    kept.push(row!.id);
  }
  await tx`delete from api_keys where state_managed and not (id = any(${kept}::uuid[]))`;
}
