import t from 'tap';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { cacheStorageLeft, STORAGE_GB } from '../../../../storage/index.js';
import { startTestKiln } from '../../../support/kiln.js';
import { signUp } from '../../../support/accounts.js';
import { buildFixturePaths, nixPathInfo } from '../../../support/nixStore.js';
import { uploadStorePath } from '../../../support/restUpload.js';
import { eventually } from '../../../support/eventually.js';

interface NarView {
  hash: string;
  store_path: string;
  package: string;
  nar_hash: string;
  nar_size: number;
  file_hash: string;
  file_size: number;
  url: string;
  references: string[];
  signature: string;
  created_at: string;
  last_fetched_at: string | null;
}
interface NarPage {
  items: NarView[];
  page: number;
  per_page: number;
  total: number;
  pages: number;
}

const hashOf = (path: string) => path.slice('/nix/store/'.length, '/nix/store/'.length + 32);

t.test('NAR management: list, show, stats, delete', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  const bob = await signUp(kiln, 'bob');
  const eve = await signUp(kiln, 'eve');
  for (const name of ['one', 'two']) t.equal((await kiln.api('PUT', '/caches', { token: ada.token, body: { name } })).status, 200);
  const [one] = await kiln.sql<{ id: string }[]>`select id from caches where name = 'one'`;
  await kiln.sql`insert into cache_members (cache_id, user_id, role) select id, ${bob.id}, 'Admin' from caches where name = 'one'`;

  const fx = buildFixturePaths();
  const inOne = [fx.file, fx.executable, fx.empty, fx.symlink, fx.tree, fx.refs];
  for (const path of inOne) {
    const up = await uploadStorePath(kiln.url, ada.token, 'one', path);
    t.equal(up.status, 200, `upload ${path}: ${JSON.stringify(up.body)}`);
  }
  for (const path of [fx.file, fx.refs]) t.equal((await uploadStorePath(kiln.url, ada.token, 'two', path)).status, 200);
  const list = (query = '', token = bob.token) => kiln.api<NarPage>('GET', `/caches/one/nars${query}`, { token });

  t.test('list: newest first by default, every field', async (t) => {
    const page = await list();
    t.equal(page.status, 200, JSON.stringify(page.message));
    t.match(page.message, { page: 1, per_page: 50, total: 6, pages: 1 });
    t.same(page.message.items.map((n) => n.store_path), [...inOne].reverse());
    const refs = page.message.items[0]!;
    const info = nixPathInfo(fx.refs);
    t.match(refs, { hash: hashOf(fx.refs), package: 'kiln-fixture-refs', nar_size: info.narSize, url: `nar/${refs.file_hash}.nar.zst` });
    t.same(refs.references, info.references.map((r) => r.slice('/nix/store/'.length)).sort());
    t.match(refs.signature, /^127\.0\.0\.1-one-1:/);
    t.equal(refs.last_fetched_at, null);
  });

  t.test('list: sort, order, filters, pages', async (t) => {
    const bySize = (await list('?sort=nar_size&order=asc')).message.items.map((n) => n.nar_size);
    t.same(bySize, [...bySize].sort((a, b) => a - b));
    t.ok(bySize[0]! < bySize[5]!);
    t.same((await list('?order=asc')).message.items.map((n) => n.store_path), inOne, 'oldest first');
    const p2 = (await list('?per_page=2&page=2')).message;
    t.match(p2, { page: 2, per_page: 2, total: 6, pages: 3 });
    t.same(p2.items.map((n) => n.store_path), [fx.symlink, fx.empty]);
    const past = (await list('?per_page=2&page=9')).message;
    t.same(past.items, []);
    t.equal(past.total, 6, 'a page past the end still counts');
    t.same((await list(`?hash=${hashOf(fx.tree).slice(0, 6)}`)).message.items.map((n) => n.store_path), [fx.tree]);
    t.same((await list('?package=FIXTURE-TR')).message.items.map((n) => n.store_path), [fx.tree], 'package: case-insensitive substring of the name');
    t.same((await list('?package=%25')).message.items, [], '% is a character, not a wildcard');
    t.same((await list('?package=fixture-e&sort=nar_size&order=desc')).message.items.map((n) => n.package), ['kiln-fixture-executable', 'kiln-fixture-empty']);
  });

  t.test('list: last_fetched_at is written in batches after narinfo requests', async (t) => {
    const basic = `Basic ${Buffer.from(`x:${ada.token}`).toString('base64')}`;
    const res = await fetch(`${kiln.url}/cache/one/${hashOf(fx.symlink)}.narinfo`, { headers: { authorization: basic } });
    t.equal(res.status, 200);
    await kiln.nars.fetches.flush();
    const items = (await list('?sort=last_fetched_at')).message.items;
    t.equal(items[0]!.store_path, fx.symlink, 'fetched ones first in desc');
    t.ok(items[0]!.last_fetched_at);
    t.equal((await list('?sort=last_fetched_at&order=asc')).message.items[5]!.store_path, fx.symlink, 'never fetched ones first in asc');
  });

  t.test('list: bad queries are 400 invalid_query naming the parameter', async (t) => {
    for (const [query, name] of [
      ['?per_page=201', 'per_page'], ['?per_page=0', 'per_page'], ['?per_page=ten', 'per_page'], ['?page=0', 'page'],
      ['?sort=name', 'sort'], ['?order=up', 'order'], ['?hash=eeee', 'hash'], ['?hash=' + 'a'.repeat(33), 'hash'], ['?colour=red', 'colour'],
    ] as const) {
      const res = await list(query);
      t.equal(res.status, 400, query);
      t.equal(res.code, 'invalid_query');
      t.match(res.message, new RegExp(`^${name}: `), `${query}: ${res.message}`);
    }
    t.equal((await list('?per_page=200')).status, 200, '200 is the maximum');
  });

  t.test('visibility: a stranger gets 404 everywhere', async (t) => {
    t.equal((await list('', eve.token)).status, 404);
    t.equal((await kiln.api('GET', `/caches/one/nars/${hashOf(fx.file)}`, { token: eve.token })).status, 404);
    t.equal((await kiln.api('GET', '/caches/one/stats', { token: eve.token })).status, 404);
    t.equal((await kiln.api('DELETE', `/caches/one/nars/${hashOf(fx.file)}`, { token: eve.token })).status, 404);
  });

  t.test('show', async (t) => {
    const shown = await kiln.api<NarView & { caches: number }>('GET', `/caches/one/nars/${hashOf(fx.file)}`, { token: bob.token });
    t.match(shown.message, { store_path: fx.file, caches: 2 });
    t.equal((await kiln.api<{ caches: number }>('GET', `/caches/one/nars/${hashOf(fx.tree)}`, { token: bob.token })).message.caches, 1);
    const missing = await kiln.api('GET', `/caches/one/nars/${'0'.repeat(32)}`, { token: bob.token });
    t.equal(missing.status, 404);
    t.match(missing.message, /no path 0{32} in cache "one"/);
    t.equal((await kiln.api('GET', '/caches/one/nars/not-a-hash', { token: bob.token })).code, 'invalid_parameter');
  });

  t.test('stats and storage limits', async (t) => {
    const stats = await kiln.api<Record<string, unknown>>('GET', '/caches/one/stats', { token: bob.token });
    const [sums] = await kiln.sql<{ nar: string; stored: string }[]>`
      select sum(p.nar_size) as nar, sum(p.file_size) as stored from path_signatures s join cached_paths p on p.id = s.cached_path_id
      where s.cache_id = ${one!.id}`;
    t.match(stats.message, { cache: 'one', paths: 6, nar_bytes: Number(sums!.nar), stored_bytes: Number(sums!.stored), max_storage_bytes: null, bytes_left: null });
    t.ok(stats.message['last_upload_at']);
    await kiln.api('PATCH', '/caches/one', { token: ada.token, body: { max_storage_bytes: Number(sums!.stored) + 1000 } });
    t.equal((await kiln.api<{ bytes_left: number }>('GET', '/caches/one/stats', { token: bob.token })).message.bytes_left, 1000);
    t.equal(await cacheStorageLeft(kiln.sql, one!.id), 1000, 'the function the upload path and the evaluation issue call');
    const [blobs] = await kiln.sql<{ n: string }[]>`select sum(file_size) as n from (select distinct file_hash, file_size from cached_paths) b`;
    await kiln.api('PATCH', '/caches/one', { token: ada.token, body: { max_storage_bytes: null } });
    t.equal(await cacheStorageLeft(kiln.sql, one!.id, 1), STORAGE_GB - Number(blobs!.n), 'cache.maxStorageGb counts each blob once');
    t.equal(await cacheStorageLeft(kiln.sql, one!.id, 0), null, 'no limit');
    await kiln.sql`update caches set max_storage_bytes = 10 where id = ${one!.id}`;
    t.equal(await cacheStorageLeft(kiln.sql, one!.id), 0, 'never negative');
    await kiln.sql`update caches set max_storage_bytes = null where id = ${one!.id}`;
  });

  t.test('delete: from one cache only its signature; from the last, the record, then the blob', async (t) => {
    const file = hashOf(fx.file);
    const [row] = await kiln.sql<{ file_hash: string }[]>`select file_hash from cached_paths where hash_part = ${file}`;
    const blob = join(kiln.baseDir, 'blobs', 'nar', `${row!.file_hash}.nar.zst`);
    t.ok(existsSync(blob));
    const basic = `Basic ${Buffer.from(`x:${ada.token}`).toString('base64')}`;
    const narinfo = (cache: string) => fetch(`${kiln.url}/cache/${cache}/${file}.narinfo`, { headers: { authorization: basic } });
    t.equal((await narinfo('one')).status, 200, 'served (and now in the hot cache)');

    const byAdmin = await kiln.api('DELETE', `/caches/one/nars/${file}`, { token: bob.token });
    t.equal(byAdmin.status, 403, 'an Admin who is not the owner may not');
    t.equal(byAdmin.code, 'owner_only');

    const first = await kiln.api<{ last_copy: boolean; store_path: string }>('DELETE', `/caches/one/nars/${file}`, { token: ada.token });
    t.same(first.message, { hash: file, store_path: fx.file, cache: 'one', last_copy: false });
    t.equal((await narinfo('one')).status, 404, 'gone from this cache at once, hot cache included');
    t.equal((await narinfo('two')).status, 200, 'the other cache keeps serving it');
    t.equal((await kiln.sql`select 1 from cached_paths where hash_part = ${file}`).length, 1, 'the record stays');
    t.equal((await kiln.api('DELETE', `/caches/one/nars/${file}`, { token: ada.token })).status, 404, 'twice: 404');

    const last = await kiln.api<{ last_copy: boolean }>('DELETE', `/caches/two/nars/${file}`, { token: ada.token });
    t.equal(last.message.last_copy, true);
    t.equal((await kiln.sql`select 1 from cached_paths where hash_part = ${file}`).length, 0, 'the record went in the same transaction');
    t.equal((await narinfo('two')).status, 404);
    t.ok(await eventually(() => !existsSync(blob), { message: 'the blob is deleted' }), 'the blob is deleted after the answer');
    t.equal((await list()).message.total, 5);
    t.equal((await kiln.api<{ paths: number }>('GET', '/caches/two/stats', { token: ada.token })).message.paths, 1);
  });

  t.test('deleting a cache leaves other caches\' paths alone', async (t) => {
    t.equal((await kiln.api('DELETE', '/caches/one', { token: ada.token })).status, 200);
    t.equal((await kiln.api<NarPage>('GET', '/caches/two/nars', { token: ada.token })).message.total, 1);
  });
});
