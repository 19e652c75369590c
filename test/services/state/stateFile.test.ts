import t from 'tap';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import argon2 from 'argon2';
import { applyStateFile, readStateFile, StateFileError, openCacheKey } from '../../../services/index.js';
import { hashApiKeySecret } from '../../../services/accounts/apiKeySecret.js';
import { accessFixture } from '../../support/accessFixture.js';
import { fullState, KEY_SECRET, writeStateFile } from '../../support/stateFixture.js';
import type { Sql } from 'postgres';

const TABLES = [
  'users', 'organizations', 'projects', 'tasks', 'caches', 'organization_members', 'project_members', 'cache_members',
  'subscriptions', 'subscription_requests', 'api_keys', 'invitations',
];

/** Every row of the model, as text, so two snapshots compare exactly. */
async function snapshot(sql: Sql): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const table of TABLES) {
    const rows = await sql.unsafe<{ r: string }[]>(`select t::text as r from ${table} t order by 1`);
    out[table] = rows.map((row) => row.r);
  }
  return out;
}

t.test('applying the state file', async (t) => {
  const f = await accessFixture(t, { domain: 'cache.example' });
  const { dir } = writeStateFile({});
  const { file } = writeStateFile(fullState(dir), dir);
  const state = readStateFile(file);
  const applied = await applyStateFile(f.deps, state);
  t.match(applied, { users: 2, organizations: 1, projects: 1, caches: 2, memberships: 3, subscriptions: 2, api_keys: 1 });

  t.test('creates what it declares, marked state_managed', async (t) => {
    const [ada] = await f.sql<{ superuser: boolean; state_managed: boolean; password_hash: string }[]>`select superuser, state_managed, password_hash from users where username = 'ada'`;
    t.match(ada, { superuser: true, state_managed: true });
    t.ok(await argon2.verify(ada!.password_hash, 'correct horse battery'), 'the password file, without its newline');
    t.same((await f.sql`select name from tasks`).map((r) => r['name']), ['default'], 'the project has its default task');
    const [main] = await f.sql<{ key_name: string; secret_key: Buffer; public_key: Buffer; public: boolean; priority: number; state_managed: boolean }[]>`
      select key_name, secret_key, public_key, public, priority, state_managed from caches where name = 'main'`;
    t.match(main, { key_name: 'cache.example-main-1', public: true, priority: 30, state_managed: true });
    const key = openCacheKey(f.deps.secretBox, main!);
    t.equal(key.publicKey.toString(), `cache.example-main-1:${main!.public_key.toString('base64')}`, 'the sealed signing key matches its public half');
    const [k] = await f.sql<{ secret_hash: string; permissions: string[]; allowed_ips: string[]; state_managed: boolean; expires_at: Date; created_at: Date }[]>`
      select secret_hash, permissions, allowed_ips::text[] as allowed_ips, state_managed, expires_at, created_at from api_keys`;
    t.equal(k!.secret_hash, hashApiKeySecret(KEY_SECRET));
    t.same(k!.permissions, ['viewProject', 'writeStore']);
    t.same(k!.allowed_ips, ['10.0.0.0/8']);
    t.equal(k!.expires_at.getTime() - k!.created_at.getTime(), 30 * 86_400_000);
    t.equal((await f.sql`select 1 from subscriptions where state_managed`).length, 2);
  });

  t.test('applying the same file again leaves the same database', async (t) => {
    const before = await snapshot(f.sql);
    await applyStateFile(f.deps, readStateFile(file));
    t.same(await snapshot(f.sql), before);
  });

  t.test('the API refuses to change declared things', async (t) => {
    const ada = { kind: 'user', via: 'session', sessionId: 's', userId: (await f.sql`select id from users where username = 'ada'`)[0]!['id'] as string, username: 'ada', superuser: true } as const;
    await t.rejects(f.services.invitations.inviteToProject(ada, 'web', { user: 'ci', role: 'View' }), { name: 'ApiError', status: 403 }, 'ada has no role on the project');
    await t.rejects(f.services.organizationMembers.add(ada, 'acme', { user: 'ci', role: 'View' }), { name: 'ApiError', status: 403, code: 'state_managed' });
    await t.rejects(f.services.projects.update(ada, 'acme', 'web', { description: 'x' }), { name: 'ApiError', status: 403, code: 'state_managed' });
    await t.rejects(f.services.members.remove(ada, 'cache', 'main', { user: 'ci' }), { name: 'ApiError', status: 403, code: 'state_managed' });
    await t.rejects(f.services.subscriptions.unsubscribeOrganization(ada, 'acme', 'private'), { name: 'ApiError', status: 403, code: 'state_managed' });
  });

  t.test('a changed file: members follow it, dropped things are released or removed', async (t) => {
    const changed = fullState(dir);
    changed.memberships = [{ user: 'ada', role: 'Admin', organization: 'acme' }, { user: 'ci', role: 'View', project: 'acme/web' }];
    changed.subscriptions = [{ project: 'acme/web', cache: 'main', mode: 1 }];
    changed.caches = [changed.caches[0]!];
    changed.api_keys = [];
    const next = join(dir, 'next.json');
    writeFileSync(next, JSON.stringify(changed));
    await applyStateFile(f.deps, readStateFile(next));
    t.same((await f.sql`select role from project_members`).map((r) => r['role']), ['View']);
    t.equal((await f.sql`select 1 from cache_members`).length, 1, 'a cache the file no longer declares keeps its members');
    t.same((await f.sql`select mode from subscriptions`).map((r) => r['mode']), [1]);
    t.same((await f.sql`select state_managed from caches where name = 'private'`).map((r) => r['state_managed']), [false], 'released, not deleted');
    t.equal((await f.sql`select 1 from api_keys`).length, 0);
  });

  t.test('polling, superseded evaluations and approval of a declared project', async (t) => {
    type Settings = { poll_interval_secs: number | null; next_poll_at: Date | null; cancel_superseded: boolean; requires_approval: boolean };
    const settings = async () => (await f.sql<Settings[]>`select poll_interval_secs, next_poll_at, cancel_superseded, requires_approval from projects where name = 'web'`)[0]!;
    t.match(await settings(), { poll_interval_secs: null, next_poll_at: null, cancel_superseded: true, requires_approval: false }, 'defaults: not polled, superseded cancelled, approval per task');
    const declared = fullState(dir);
    const base = declared.projects[0]!;
    const write = (project: Record<string, unknown>) => {
      declared.projects = [{ ...base, ...project }];
      const next = join(dir, 'polling.json');
      writeFileSync(next, JSON.stringify(declared));
      return readStateFile(next);
    };
    await applyStateFile(f.deps, write({ poll_interval_secs: 120, cancel_superseded: false, requires_approval: true }));
    const polled = await settings();
    t.match(polled, { poll_interval_secs: 120, cancel_superseded: false, requires_approval: true });
    t.ok(polled.next_poll_at, 'due for its first poll');
    await f.sql`update projects set next_poll_at = '2030-01-01' where name = 'web'`;
    await applyStateFile(f.deps, write({ poll_interval_secs: 120, cancel_superseded: false, requires_approval: true }));
    t.same((await settings()).next_poll_at, new Date('2030-01-01'), 'the same interval keeps its schedule');
    await applyStateFile(f.deps, write({ poll_interval_secs: null }));
    t.match(await settings(), { poll_interval_secs: null, next_poll_at: null, cancel_superseded: true, requires_approval: false }, 'dropped from the file: back to the defaults');
    await t.rejects(applyStateFile(f.deps, write({ poll_interval_secs: 5 })), /poll_interval_secs: at least 60 on this instance \(projects\.minPollIntervalSecs\)/, 'below the instance minimum');
    t.throws(() => write({ poll_interval_secs: 'often' }), 'not a number: the file is refused');
  });
});

t.test('readStateFile names every problem without a database', async (t) => {
  const { dir } = writeStateFile({});
  const bad = (state: unknown) => {
    const { file } = writeStateFile(state, dir);
    try {
      readStateFile(file);
      return [];
    } catch (e) {
      t.type(e, StateFileError);
      return (e as StateFileError).problems;
    }
  };
  t.same(bad(fullState(dir)), [], 'the full example is valid');
  t.match(bad({ users: [{ username: 'a b' }] }), [/^users\.0\.username: /]);
  t.match(bad({ organisations: [] }), [/organisations/]);
  t.match(bad({ projects: [{ organization: 'nope', name: 'web', repository: 'x' }] }), [/^projects\.0\.organization: organization "nope" is not declared/]);
  t.match(bad({ users: [{ username: 'a' }, { username: 'A' }] }), [/^users\.1: user "A" is declared twice/]);
  t.match(bad({ memberships: [{ user: 'a', role: 'Admin' }] }), [/names exactly one of organization, project or cache/]);
  t.match(bad({ users: [{ username: 'a' }], api_keys: [{ user: 'a', name: 'k', permissions: ['fly'], secret_file: '/x' }] }), [/^api_keys\.0\.permissions\.0: /]);
  t.match(bad({ users: [{ username: 'a' }], api_keys: [{ user: 'a', name: 'k', permissions: ['writeStore'], secret_file: '/nonexistent/key', allowed_ips: ['300.1.1.1/8'] }] }), [/^api_keys\.0\.allowed_ips\.0: /]);
  t.match(bad({ users: [{ username: 'a' }], api_keys: [{ user: 'a', name: 'k', permissions: ['writeStore'], secret_file: '/nonexistent/key' }] }), [/^api_keys\.0\.secret_file: cannot read \/nonexistent\/key/]);
  writeFileSync(join(dir, 'short.key'), 'abc');
  t.match(bad({ users: [{ username: 'a' }], api_keys: [{ user: 'a', name: 'k', permissions: ['writeStore'], secret_file: join(dir, 'short.key') }] }), [/must start with SVC/]);
  t.match(bad({ subscriptions: [{ cache: 'c', mode: 5 }] }), [/mode/]);
  writeFileSync(join(dir, 'broken.json'), '{');
  t.throws(() => readStateFile(join(dir, 'broken.json')), StateFileError);
});
