// storage/db/caches.ts on a real database: the caller's role on a cache (owner, member, stranger,
// anonymous), which caches a caller is offered, a PATCH that leaves unnamed settings alone, the
// subscription mode a project's builds get, and the state file's declare/release.
import { randomBytes } from 'node:crypto';
import type { Sql } from 'postgres';
import t from 'tap';
import {
  allCacheRows, cacheIdNamed, cacheNameOf, cacheRowById, cacheRowNamed, cacheSealedKey, cacheServingRow, candidateCacheRows, declareCache, deleteCache,
  insertCache, releaseUndeclaredCaches, setCacheActive, subscribedCacheRows, updateCacheSettings, type NewCache,
} from '../../../storage/index.js';
import { testDatabase } from '../../support/db.js';
import { insertProject } from '../../support/modelRows.js';

const user = async (sql: Sql, username: string): Promise<string> =>
  (await sql<{ id: string }[]>`insert into users (username) values (${username}) returning id`)[0]!.id;

const cache = (name: string, more: Partial<NewCache> = {}): NewCache => ({
  name, description: '', public: false, priority: 40, owner_id: null,
  key_name: `test-${name}-1`, public_key: randomBytes(32), secret_key: randomBytes(64), ...more,
});

t.test('a cache row carries the caller\'s role: Admin for the owner, the membership\'s, else none', async (t) => {
  const { sql } = await testDatabase(t);
  const ada = await user(sql, 'ada');
  const bob = await user(sql, 'bob');
  const eve = await user(sql, 'eve');
  const id = await insertCache(sql, cache('Main', { owner_id: ada, description: 'builds' }));
  await sql`insert into cache_members (cache_id, user_id, role) values (${id}, ${bob}, 'View')`;

  const owned = await cacheRowNamed(sql, ada, 'main');
  t.match(owned, { id, name: 'Main', description: 'builds', owner: 'ada', owner_id: ada, role: 'Admin', active: true, state_managed: false });
  t.type(owned!.created_at, Date);
  t.equal((await cacheRowNamed(sql, bob, 'MAIN'))!.role, 'View', 'names match in any case');
  t.equal((await cacheRowById(sql, eve, id))!.role, null);
  t.equal((await cacheRowById(sql, null, id))!.role, null, 'an anonymous caller has no role');
  t.equal(await cacheRowNamed(sql, ada, 'other'), null);
  t.equal(await cacheIdNamed(sql, 'MAIN'), id);
  t.equal(await cacheNameOf(sql, id), 'Main');
});

t.test('candidates: public caches and those the caller owns or is a member of, by name', async (t) => {
  const { sql } = await testDatabase(t);
  const ada = await user(sql, 'ada');
  const bob = await user(sql, 'bob');
  await insertCache(sql, cache('c-owned', { owner_id: ada }));
  const member = await insertCache(sql, cache('b-member', { owner_id: bob }));
  await sql`insert into cache_members (cache_id, user_id, role) values (${member}, ${ada}, 'Write')`;
  await insertCache(sql, cache('a-public', { public: true, owner_id: bob }));
  await insertCache(sql, cache('d-private', { owner_id: bob }));

  t.same((await candidateCacheRows(sql, ada)).map((r) => [r.name, r.role]), [['a-public', null], ['b-member', 'Write'], ['c-owned', 'Admin']]);
  t.same((await candidateCacheRows(sql, null)).map((r) => r.name), ['a-public']);
  t.same((await allCacheRows(sql, ada)).map((r) => r.name), ['a-public', 'b-member', 'c-owned', 'd-private']);
});

t.test('writes: a PATCH changes only what it names; active; delete', async (t) => {
  const { sql } = await testDatabase(t);
  const ada = await user(sql, 'ada');
  const id = await insertCache(sql, cache('main', { description: 'kept', priority: 30, owner_id: ada }));
  await updateCacheSettings(sql, id, { description: null, public: true, priority: null, local_priority: 5, max_storage_bytes: 1000, nar_ttl_hours: 48, keep_forever: true, owner_id: ada });
  t.match(await cacheRowById(sql, ada, id), { description: 'kept', public: true, priority: 30, local_priority: 5, max_storage_bytes: '1000', nar_ttl_hours: 48, keep_forever: true });
  await updateCacheSettings(sql, id, { description: null, public: null, priority: null, local_priority: null, max_storage_bytes: 1000, nar_ttl_hours: null, keep_forever: null, owner_id: ada });
  t.match(await cacheRowById(sql, ada, id), { nar_ttl_hours: null, keep_forever: true }, 'keep_forever stays unless named; nar_ttl_hours is written as given');

  await setCacheActive(sql, id, false);
  const serving = await cacheServingRow(sql, 'MAIN');
  t.match(serving, { id, name: 'main', active: false, public: true, priority: 30, local_priority: 5, key_name: 'test-main-1' });
  t.notOk(serving && 'secret_key' in serving, 'the serving row carries no private key');
  t.equal((await cacheSealedKey(sql, id))!.secret_key.length, 64);

  await deleteCache(sql, id);
  t.equal(await cacheServingRow(sql, 'main'), null);
  t.equal(await cacheSealedKey(sql, id), null);
});

t.test('a project uses its own and its organization\'s active subscriptions, with the strongest mode', async (t) => {
  const { sql } = await testDatabase(t);
  const project = await insertProject(sql, 'acme', 'app');
  const org = (await sql<{ organization_id: string }[]>`select organization_id from projects where id = ${project}`)[0]!.organization_id;
  const both = await insertCache(sql, cache('both'));
  const own = await insertCache(sql, cache('own', { public: true }));
  const off = await insertCache(sql, cache('off'));
  await insertCache(sql, cache('unrelated'));
  await sql`insert into subscriptions (project_id, cache_id, mode) values (${project}, ${both}, 2), (${project}, ${own}, 1), (${project}, ${off}, 0)`;
  await sql`insert into subscriptions (organization_id, cache_id, mode) values (${org}, ${both}, 0)`;
  await setCacheActive(sql, off, false);

  t.same((await subscribedCacheRows(sql, project)).map((r) => [r.name, r.mode, r.public]), [['both', 0, false], ['own', 1, true]]);
});

t.test('the state file declares caches and releases those it no longer names', async (t) => {
  const { sql } = await testDatabase(t);
  const declared = await insertCache(sql, cache('declared'), true);
  const kept = await insertCache(sql, cache('kept'));
  await insertCache(sql, cache('dropped'), true);
  await declareCache(sql, kept, { description: 'now declared', public: true, priority: 10, owner_id: null });
  await releaseUndeclaredCaches(sql, [declared, kept]);

  const rows = await allCacheRows(sql, null);
  t.same(rows.map((r) => [r.name, r.state_managed]), [['declared', true], ['dropped', false], ['kept', true]]);
  t.match(rows.find((r) => r.id === kept), { description: 'now declared', public: true, priority: 10 });
});
