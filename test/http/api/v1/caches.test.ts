import t from 'tap';
import { CacheView, SigningKey, VerifyingKey } from '../../../../protocol/index.js';
import { startTestKiln } from '../../../support/kiln.js';
import { signUp } from '../../../support/accounts.js';

/** What a response breaks of the CacheView schema: no issues when it is one. */
const schemaIssues = (value: unknown): string[] =>
  CacheView.safeParse(value).error?.issues.map((i) => `${i.path.join('.')}: ${i.message}`) ?? [];

t.test('caches: create, read, list, update, enable/disable, key, delete', async (t) => {
  const kiln = await startTestKiln(t, { domain: 'cache.example.org' });
  await signUp(kiln, 'root'); // the first account is the superuser; the others are plain
  const ada = await signUp(kiln, 'ada');
  const bob = await signUp(kiln, 'bob');
  const eve = await signUp(kiln, 'eve');

  const created = await kiln.api<CacheView>('PUT', '/caches', { token: ada.token, body: { name: 'main', description: 'builds' } });
  t.equal(created.status, 200, JSON.stringify(created.message));
  const main = created.message;
  t.match(main, { name: 'main', description: 'builds', public: false, priority: 40, local_priority: 0, active: true, owner: 'ada', role: 'Admin', max_storage_bytes: null });
  t.ok(main.permissions.includes('manageCache') && main.permissions.includes('writeStore'), 'the creator holds Admin');
  t.match(main.public_key, /^cache\.example\.org-main-1:[A-Za-z0-9+/]{43}=$/, 'key named <host>-<cache>-1 from the domain');
  t.ok(VerifyingKey.parse(main.public_key).ok, 'the public key is what trusted-public-keys takes');
  t.equal(main.url, 'http://cache.example.org/cache/main', 'the substituter URL');
  t.same(schemaIssues(main), [], 'the answer is a CacheView (protocol/api/caches.ts)');

  t.test('the secret half is sealed at rest and signs for the public half', async (t) => {
    const [row] = await kiln.sql<{ secret_key: Buffer; public_key: Buffer }[]>`select secret_key, public_key from caches where name = 'main'`;
    t.not(row!.secret_key.length, 64, 'not the raw 64-byte libsodium key');
    t.notOk(row!.secret_key.includes(row!.public_key), 'the public half does not show through the sealed secret');
    const key = await kiln.api<string>('GET', '/caches/main/key', { token: ada.token });
    t.equal(key.message, main.public_key);
  });

  t.test('create: defaults, conflicts, a public cache', async (t) => {
    t.equal((await kiln.api('PUT', '/caches', { token: bob.token, body: { name: 'MAIN' } })).code, 'cache_exists', 'names are case-insensitive');
    const pub = await kiln.api<CacheView>('PUT', '/caches', { token: bob.token, body: { name: 'pub', public: true, priority: 10 } });
    t.match(pub.message, { public: true, priority: 10, owner: 'bob' });
    t.not(pub.message.public_key, main.public_key, 'each cache has its own key');
  });

  t.test('list: own caches and public ones; nothing private of others', async (t) => {
    const names = async (token: string) => (await kiln.api<CacheView[]>('GET', '/caches', { token })).message.map((c) => c.name);
    t.same(await names(ada.token), ['main', 'pub']);
    t.same(await names(eve.token), ['pub'], 'a stranger sees the public cache only');
    const pubForEve = (await kiln.api<CacheView[]>('GET', '/caches', { token: eve.token })).message[0]!;
    t.same(pubForEve.permissions, ['viewCache']);
    t.same(schemaIssues(pubForEve), [], 'a listed cache is a CacheView too');
    t.equal(pubForEve.role, null);
    t.equal((await kiln.api('GET', '/caches')).status, 401, 'signed in only');
  });

  t.test('a stranger learns nothing of a private cache: 404, not 403', async (t) => {
    for (const [method, path] of [['GET', '/caches/main'], ['GET', '/caches/main/key'], ['PATCH', '/caches/main'], ['DELETE', '/caches/main'], ['POST', '/caches/main/active']] as const) {
      const res = await kiln.api(method, path, { token: eve.token, body: method === 'PATCH' ? { description: 'x' } : undefined });
      t.equal(res.status, 404, `${method} ${path}`);
      t.equal(res.code, 'not_found');
    }
    t.equal((await kiln.api('GET', '/caches/pub/key', { token: eve.token })).status, 200, 'anyone may read a public cache key');
    const refused = await kiln.api('PATCH', '/caches/pub', { token: eve.token, body: { description: 'mine' } });
    t.equal(refused.status, 403);
    t.match(refused.message, /manageCache is required on cache "pub"/);
  });

  t.test('members: View reads, cannot manage; Admin manages but only the owner deletes', async (t) => {
    await kiln.sql`insert into cache_members (cache_id, user_id, role) values (${main.id}, ${bob.id}, 'View')`;
    t.equal((await kiln.api<CacheView>('GET', '/caches/main', { token: bob.token })).message.role, 'View');
    t.equal((await kiln.api('PATCH', '/caches/main', { token: bob.token, body: { priority: 1 } })).status, 403);
    await kiln.sql`update cache_members set role = 'Admin' where user_id = ${bob.id}`;
    t.equal((await kiln.api<CacheView>('PATCH', '/caches/main', { token: bob.token, body: { priority: 30 } })).message.priority, 30);
    const del = await kiln.api('DELETE', '/caches/main', { token: bob.token });
    t.equal(del.status, 403);
    t.equal(del.code, 'owner_only');
    const handOver = await kiln.api('PATCH', '/caches/main', { token: bob.token, body: { owner: 'bob' } });
    t.equal(handOver.code, 'owner_only', 'an Admin who is not the owner cannot take the cache');
  });

  t.test('update: fields, limits, owner hand-over', async (t) => {
    const patched = await kiln.api<CacheView>('PATCH', '/caches/main', {
      token: ada.token, body: { description: 'CI builds', public: true, local_priority: 5, max_storage_bytes: 1_000_000 },
    });
    t.match(patched.message, { description: 'CI builds', public: true, local_priority: 5, max_storage_bytes: 1_000_000, priority: 30 });
    t.same(schemaIssues(patched.message), [], 'a storage limit is a number in a CacheView');
    const cleared = await kiln.api<CacheView>('PATCH', '/caches/main', { token: ada.token, body: { max_storage_bytes: null, public: false } });
    t.match(cleared.message, { max_storage_bytes: null, public: false, description: 'CI builds' }, 'null clears the limit; omitted fields stay');
    t.equal((await kiln.api('PATCH', '/caches/main', { token: ada.token, body: { owner: 'nobody' } })).code, 'user_not_found');
    const handed = await kiln.api<CacheView>('PATCH', '/caches/main', { token: ada.token, body: { owner: 'bob' } });
    t.equal(handed.message.owner, 'bob');
    t.equal((await kiln.api<CacheView>('GET', '/caches/main', { token: ada.token })).status, 404, 'the former owner without a membership no longer sees it');
    t.equal((await kiln.api<CacheView>('PATCH', '/caches/main', { token: bob.token, body: { owner: 'ada' } })).message.owner, 'ada');
  });

  t.test('active: an inactive cache serves nothing at /cache/{cache}', async (t) => {
    await kiln.api('PATCH', '/caches/main', { token: ada.token, body: { public: true } });
    t.equal((await fetch(`${kiln.url}/cache/main/nix-cache-info`)).status, 200);
    const off = await kiln.api<CacheView>('DELETE', '/caches/main/active', { token: ada.token });
    t.equal(off.message.active, false);
    t.equal((await fetch(`${kiln.url}/cache/main/nix-cache-info`)).status, 404, 'the binary cache forgets it at once in this process');
    t.equal((await kiln.api<CacheView>('POST', '/caches/main/active', { token: ada.token })).message.active, true);
    t.equal((await fetch(`${kiln.url}/cache/main/nix-cache-info`)).status, 200);
  });

  t.test('delete: the owner deletes; the name is free again', async (t) => {
    t.equal((await kiln.api('DELETE', '/caches/main', { token: ada.token })).status, 200);
    t.equal((await kiln.api('GET', '/caches/main', { token: ada.token })).status, 404);
    t.equal((await fetch(`${kiln.url}/cache/main/nix-cache-info`)).status, 404);
    const again = await kiln.api<CacheView>('PUT', '/caches', { token: eve.token, body: { name: 'main' } });
    t.equal(again.status, 200);
    t.not(again.message.public_key, main.public_key, 'a new cache gets a new key');
  });
});

t.test('the key is generated from serveUrl without a domain, and signs like nix', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  const res = await kiln.api<CacheView>('PUT', '/caches', { token: ada.token, body: { name: 'k' } });
  t.match(res.message.public_key, /^127\.0\.0\.1-k-1:/);
  // The sealed secret opens to a key whose public half is the one shown.
  const { openSecretBox } = await import('../../../../storage/index.js');
  const { openCacheKey } = await import('../../../../services/index.js');
  const [row] = await kiln.sql<{ key_name: string; secret_key: Buffer }[]>`select key_name, secret_key from caches where name = 'k'`;
  const key: SigningKey = openCacheKey(await openSecretBox(kiln.sql, { baseDir: kiln.baseDir, 'secrets.cryptFile': null }), row!);
  t.equal(key.publicKey.toString(), res.message.public_key);
});

t.test('permissions.createCache', async (t) => {
  for (const [policy, expectUser, expectSuper] of [['none', 403, 403], ['superusers', 403, 200], ['everyone', 200, 200]] as const) {
    t.test(policy, async (t) => {
      const kiln = await startTestKiln(t, { 'permissions.createCache': policy });
      const root = await signUp(kiln, 'root');
      const ada = await signUp(kiln, 'ada');
      const byUser = await kiln.api('PUT', '/caches', { token: ada.token, body: { name: 'a' } });
      t.equal(byUser.status, expectUser);
      if (expectUser === 403) t.equal(byUser.code, 'creation_disabled');
      t.equal((await kiln.api('PUT', '/caches', { token: root.token, body: { name: 'b' } })).status, expectSuper);
    });
  }
});

t.test('bad bodies are 400s naming the field, and write nothing', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  const cases: [string, string, unknown, RegExp][] = [
    ['PUT', '/caches', {}, /^name: /],
    ['PUT', '/caches', { name: 'has space' }, /^name: must be 1-63/],
    ['PUT', '/caches', { name: 'ok', public: 'yes' }, /^public: /],
    ['PUT', '/caches', { name: 'ok', priority: -1 }, /^priority: /],
    ['PUT', '/caches', { name: 'ok', priority: 1.5 }, /^priority: /],
    ['PUT', '/caches', { name: 'ok', description: 'd'.repeat(2001) }, /^description: /],
    ['PUT', '/caches', { name: 'ok', colour: 'red' }, /colour/],
  ];
  for (const [method, path, body, message] of cases) {
    const res = await kiln.api(method, path, { token: ada.token, body });
    t.equal(res.status, 400, `${JSON.stringify(body).slice(0, 60)} → 400`);
    t.equal(res.code, 'invalid_body');
    t.match(res.message, message);
  }
  t.equal((await kiln.sql`select 1 from caches`).length, 0, 'nothing was written');
  await kiln.api('PUT', '/caches', { token: ada.token, body: { name: 'main' } });
  for (const [body, message] of [
    [{ max_storage_bytes: 0 }, /^max_storage_bytes: /],
    [{ max_storage_bytes: '10' }, /^max_storage_bytes: /],
    [{ local_priority: -3 }, /^local_priority: /],
    [{ owner: 'not a name' }, /^owner: /],
    [{ name: 'renamed' }, /name/],
  ] as const) {
    const res = await kiln.api('PATCH', '/caches/main', { token: ada.token, body });
    t.equal(res.status, 400, JSON.stringify(body));
    t.match(res.message, message);
  }
  t.equal((await kiln.api('GET', '/caches/not%20a%20name', { token: ada.token })).code, 'invalid_parameter');
  const [row] = await kiln.sql<{ max_storage_bytes: string | null; local_priority: number }[]>`select max_storage_bytes, local_priority from caches`;
  t.same(row, { max_storage_bytes: null, local_priority: 0 }, 'nothing changed');
});

t.test('API keys: a pinned key sees only its cache; a key needs manageCache to create', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  await kiln.api('PUT', '/caches', { token: ada.token, body: { name: 'one' } });
  await kiln.api('PUT', '/caches', { token: ada.token, body: { name: 'two' } });
  const key = async (body: Record<string, unknown>) => (await kiln.api<{ secret: string }>('POST', '/user/keys', { token: ada.token, body })).message.secret;
  const pinned = await key({ name: 'pinned', permissions: ['viewCache', 'writeStore'], cache: 'one' });
  t.same((await kiln.api<CacheView[]>('GET', '/caches', { token: pinned })).message.map((c) => c.name), ['one']);
  t.equal((await kiln.api('GET', '/caches/two', { token: pinned })).status, 404);
  t.same((await kiln.api<CacheView>('GET', '/caches/one', { token: pinned })).message.permissions, ['viewCache', 'writeStore'], 'the key\'s list intersected with the role');
  t.equal((await kiln.api('PUT', '/caches', { token: pinned, body: { name: 'three' } })).status, 403);
  const narrow = await key({ name: 'narrow', permissions: ['viewCache'] });
  t.equal((await kiln.api('PUT', '/caches', { token: narrow, body: { name: 'three' } })).status, 403);
  const manage = await key({ name: 'manage', permissions: ['viewCache', 'manageCache'] });
  t.equal((await kiln.api<CacheView>('PUT', '/caches', { token: manage, body: { name: 'three' } })).message.owner, 'ada');

  // A cache the state file declares is changed there; enabling and disabling stay operational.
  await kiln.sql`update caches set state_managed = true where name = 'one'`;
  t.equal((await kiln.api('PATCH', '/caches/one', { token: ada.token, body: { priority: 1 } })).code, 'state_managed');
  t.equal((await kiln.api('DELETE', '/caches/one', { token: ada.token })).code, 'state_managed');
  t.equal((await kiln.api<CacheView>('DELETE', '/caches/one/active', { token: ada.token })).message.active, false);
});
