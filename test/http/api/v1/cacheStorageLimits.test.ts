// Uploads refused at ingest when they would not fit under the cache's max_storage_bytes or the
// instance's cache.maxStorageGb (docs/caches.md, "Storage limits"): REST single-shot, chunked
// and finalize, and `nix copy` PUTs at the binary cache paths, all with 413 cache_full (a 4xx,
// never a 5xx, for Nix 2.8), nothing stored, a staged upload left resumable.
import t from 'tap';
import { renderNarinfo } from '../../../../protocol/index.js';
import { startTestKiln } from '../../../support/kiln.js';
import { signUp } from '../../../support/accounts.js';
import { createTestCache } from '../../../support/caches.js';
import { countRows, makeTestNar, type TestNar } from '../../../support/narStorage.js';
import { finalize, putChunk, uploadSingle } from '../../../support/narUploads.js';
import { buildFixturePaths } from '../../../support/nixStore.js';
import { netrcFile, runNix } from '../../../support/nixClient.js';

const infoOf = (nar: TestNar) => ({
  store_path: nar.info.storePath,
  nar_hash: nar.info.narHash,
  nar_size: nar.info.narSize,
  references: nar.info.references,
});

t.test('uploads past the storage limits', async (t) => {
  const kiln = await startTestKiln(t, { 'cache.maxStorageGb': 1 });
  const ada = await signUp(kiln, 'ada');
  const cache = await createTestCache(kiln.sql, 'main', { ownerId: ada.id });
  const limit = (bytes: number | null) => kiln.sql`update caches set max_storage_bytes = ${bytes} where id = ${cache.id}`;
  // A limit `bytes` above what the cache holds now.
  const room = async (bytes: number) => {
    const [row] = await kiln.sql<{ used: string }[]>`
      select coalesce(sum(p.file_size), 0) as used from path_signatures s join cached_paths p on p.id = s.cached_path_id where s.cache_id = ${cache.id}`;
    await limit(Number(row!.used) + bytes);
  };
  const basic = { authorization: `Basic ${Buffer.from(`nix:${ada.token}`).toString('base64')}` };

  t.test('single shot: 413 cache_full naming the limit, nothing stored', async (t) => {
    const nar = await makeTestNar(t, { f: 'too big for the cache\n'.repeat(50) });
    await limit(100);
    const before = await countRows(kiln.sql);
    const res = await uploadSingle(kiln, ada.token, 'main', { narinfo: infoOf(nar), nar: nar.nar });
    t.equal(res.status, 413);
    t.equal(res.body.code, 'cache_full');
    t.match(res.body.message, /cache "main" has 100 bytes left under its own limit of 100 bytes \(max_storage_bytes\)/);
    t.same(await countRows(kiln.sql), before, 'nothing stored');
    await limit(null);
    t.equal((await uploadSingle(kiln, ada.token, 'main', { narinfo: infoOf(nar), nar: nar.nar })).status, 200, 'fits without the limit');
    await limit(1);
    const again = await uploadSingle(kiln, ada.token, 'main', { narinfo: infoOf(nar), nar: nar.nar });
    t.equal(again.status, 200, 'a path the cache already holds needs no room');
    t.match(again.body.message, { status: 'held' });
    await limit(null);
  });

  t.test('chunked: a chunk past the limit is refused; finalize is refused and the staging stays', async (t) => {
    const nar = await makeTestNar(t, { f: 'chunked past the limit\n'.repeat(100) });
    await room(500);
    const first = await putChunk(kiln, ada.token, 'main', nar.hash, 0, nar.nar.subarray(0, 400));
    t.equal(first.status, 200, 'the first 400 bytes fit');
    const second = await putChunk(kiln, ada.token, 'main', nar.hash, 400, nar.nar.subarray(400));
    t.equal(second.status, 413);
    t.equal(second.body.code, 'cache_full');
    await limit(null);
    t.equal((await putChunk(kiln, ada.token, 'main', nar.hash, 400, nar.nar.subarray(400))).status, 200);
    await room(500);
    const refused = await finalize(kiln, ada.token, 'main', nar.hash, infoOf(nar));
    t.equal(refused.status, 413);
    t.equal(refused.body.code, 'cache_full');
    t.equal((await countRows(kiln.sql)).staged, 1, 'the staged upload is kept');
    await limit(null);
    t.equal((await finalize(kiln, ada.token, 'main', nar.hash, infoOf(nar))).status, 200, 'finalize after the limit was raised');
  });

  t.test('nix copy PUTs: 413, never 5xx', async (t) => {
    const nar = await makeTestNar(t, { f: 'nix copy past the limit\n'.repeat(100) });
    const narinfo = renderNarinfo({ ...nar.info, url: `nar/${nar.hash}.nar`, compression: 'none' });
    const put = (path: string, body: Uint8Array | string) => fetch(`${kiln.url}/cache/main/${path}`, { method: 'PUT', body, headers: basic });
    await limit(1);
    const full = await put(`nar/${nar.hash}.nar`, nar.nar);
    t.equal(full.status, 413, 'a full cache refuses the NAR file');
    t.match(await full.text(), /cache_full/);
    await room(100);
    t.equal((await put(`nar/${nar.hash}.nar`, nar.nar)).status, 200, 'the NAR file is staged while the cache has room');
    const before = await countRows(kiln.sql);
    const info = await put(`${nar.hash}.narinfo`, narinfo);
    t.equal(info.status, 413, 'the narinfo names a NarSize that does not fit');
    t.same(await countRows(kiln.sql), before, 'nothing stored');
    await limit(null);
    t.equal((await put(`${nar.hash}.narinfo`, narinfo)).status, 200);
  });

  t.test('real `nix copy --to` into a full cache fails at once with the 413, not a hang', async (t) => {
    const fx = buildFixturePaths();
    await limit(1);
    const before = await countRows(kiln.sql);
    const copy = await runNix('nix', ['copy', '--to', `${kiln.url}/cache/main?compression=zstd`, fx.file], { netrc: netrcFile(ada.token) });
    t.not(copy.status, 0);
    t.match(copy.stderr, /413/);
    t.same((await countRows(kiln.sql)).cachedPaths, before.cachedPaths, 'nothing stored');
    await limit(null);
  });

  t.test('the instance limit (cache.maxStorageGb) applies as well', async (t) => {
    // A blob row of 1 GiB fills the instance (the row alone counts: limits count rows, not files).
    const filler = await makeTestNar(t, { f: 'filler\n' });
    const [row] = await kiln.sql<{ id: string }[]>`
      insert into cached_paths (hash_part, store_path, nar_hash, nar_size, file_hash, file_size, listing)
      values (${filler.hash}, ${filler.info.storePath}, ${filler.info.narHash}, ${filler.info.narSize},
              ${'0'.repeat(52)}, ${1024 ** 3}, '{}') returning id`;
    t.teardown(() => kiln.sql`delete from cached_paths where id = ${row!.id}`);
    const nar = await makeTestNar(t, { f: 'over the instance limit\n' });
    const res = await uploadSingle(kiln, ada.token, 'main', { narinfo: infoOf(nar), nar: nar.nar });
    t.equal(res.status, 413);
    t.match(res.body.message, /the instance's limit of 1 GiB \(cache\.maxStorageGb\)/);
  });
});
