// The narinfo reads behind the binary cache routes (storage/nars/narReads.ts), on a real database
// and a hot cache on a clock the test moves: an answer is trusted for its time to live, then served
// once more while one query fetches the fresh one; a miss is remembered for its shorter time.
import { join } from 'node:path';
import pino from 'pino';
import t from 'tap';
import { FilesystemBlobStore, HotCache, NEGATIVE_TTL_MS, POSITIVE_TTL_MS } from '../../../storage/index.js';
import { fetchRecorder } from '../../../storage/nars/fetchRecorder.js';
import { narReads, type HotValue } from '../../../storage/nars/narReads.js';
import { StorageReadGate } from '../../../storage/nars/storageReadGate.js';
import { createTestCache } from '../../support/caches.js';
import { testDatabase } from '../../support/db.js';

const hash = '0c8mpcmk6vjh4wvcr8rdl91nr2ksdqk0';
const narHash = `sha256:${'1'.repeat(52)}`;

t.test('a narinfo lives for its TTL, then is served once more while it is fetched again', async (t) => {
  const { sql } = await testDatabase(t);
  const dir = t.testdir();
  const cache = await createTestCache(sql, 'main', { baseDir: dir });
  const [path] = await sql<{ id: string }[]>`
    insert into cached_paths (hash_part, store_path, nar_hash, nar_size, file_hash, file_size, listing)
    values (${hash}, ${`/nix/store/${hash}-hello`}, ${narHash}, 100, ${'2'.repeat(52)}, 90, '{}') returning id`;
  const sign = (signature: string) => sql`
    insert into path_signatures (cache_id, hash_part, cached_path_id, signature) values (${cache.id}, ${hash}, ${path!.id}, ${signature})
    on conflict (cache_id, hash_part) do update set signature = excluded.signature`;
  await sign('main:one');

  let now = 1_000_000;
  const fetches = fetchRecorder(sql, pino({ level: 'silent' }));
  t.teardown(() => fetches.close());
  const reads = narReads({ sql, blobs: new FilesystemBlobStore(join(dir, 'blobs')), hot: new HotCache<HotValue>(1 << 20, () => now), fetches, gate: new StorageReadGate({ maxReads: 4, maxReadsPerWorker: 2, openTimeoutSecs: 60 }), smallBytes: 1 << 20 });
  const inMemory = () => {
    const known = reads.narinfoInMemory(cache.id, hash);
    return known === undefined ? 'unknown' : known === null ? 'missing' : /^Sig: main:(.*)$/m.exec(known.toString())![1]!;
  };
  /** Reads from memory until it says `want`, a database round trip apart (the refresh runs meanwhile); bounded. */
  const settlesOn = async (want: string) => {
    let seen = inMemory();
    for (let round = 0; seen !== want && round < 2000; round++) {
      await sql`select 1`;
      seen = inMemory();
    }
    return seen;
  };

  t.equal(inMemory(), 'unknown', 'nothing known before the first read');
  t.match((await reads.narinfo(cache.id, hash))?.toString(), /^Sig: main:one$/m);
  await sign('main:two'); // another server process changes the path
  now += POSITIVE_TTL_MS - 1;
  t.equal(inMemory(), 'one', 'within its TTL the answer is served from memory');
  now += 1;
  t.equal(inMemory(), 'one', 'expired: served once more, not waited for');
  t.equal(await settlesOn('two'), 'two', 'and the fresh answer replaces it');

  await sql`delete from path_signatures where cache_id = ${cache.id}`;
  now += POSITIVE_TTL_MS;
  t.equal(inMemory(), 'two');
  t.equal(await settlesOn('missing'), 'missing', 'a path gone elsewhere is a miss after one TTL and one query');
  await sign('main:three');
  now += NEGATIVE_TTL_MS - 1;
  t.equal(inMemory(), 'missing', 'a miss is remembered for its own, shorter TTL');
  now += 1;
  t.equal(await settlesOn('three'), 'three');

  reads.forget(cache.id, hash);
  t.equal(inMemory(), 'unknown', 'forget drops what this process knew');
});
