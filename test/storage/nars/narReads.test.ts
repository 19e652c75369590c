// The narinfo reads behind the binary cache routes (storage/nars/narReads.ts), on a real database
// and a hot cache on a clock the test moves: an answer is trusted for its time to live, then served
// once more while one query fetches the fresh one; a miss is remembered for its shorter time.
// Lookups asked for in one turn share one query, and what a lookup found is not kept when its path
// was forgotten (an upload through this process) while it ran.
import { join } from 'node:path';
import pino from 'pino';
import type { Sql } from 'postgres';
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

/** Hash parts of the test paths (nix32). */
const hashes = ['1c8mpcmk6vjh4wvcr8rdl91nr2ksdqk0', '2c8mpcmk6vjh4wvcr8rdl91nr2ksdqk0', '3c8mpcmk6vjh4wvcr8rdl91nr2ksdqk0', '4c8mpcmk6vjh4wvcr8rdl91nr2ksdqk0', '5c8mpcmk6vjh4wvcr8rdl91nr2ksdqk0'];

/**
 * The real database behind a counter of the statements made through it and, while `hold` is set,
 * a gate: a statement's rows are handed over only once the test opens it (`ran` says it ran).
 */
function watched(sql: Sql) {
  const watch = { statements: 0, hold: null as Promise<void> | null, ran: () => undefined as void };
  const proxy = new Proxy(sql, {
    apply(target, thisArg, args: unknown[]) {
      watch.statements++;
      const hold = watch.hold;
      const pending = Reflect.apply(target, thisArg, args) as Promise<unknown>;
      return hold === null ? pending : pending.then(async (rows) => {
        watch.ran();
        await hold;
        return rows;
      });
    },
  });
  return { watch, sql: proxy };
}

async function signedPaths(sql: Sql, cacheId: string, parts: readonly string[]): Promise<void> {
  for (const [i, part] of parts.entries()) {
    const [path] = await sql<{ id: string }[]>`
      insert into cached_paths (hash_part, store_path, nar_hash, nar_size, file_hash, file_size, listing)
      values (${part}, ${`/nix/store/${part}-p${i}`}, ${narHash}, 100, ${String(i).repeat(52)}, 90, '{}') returning id`;
    await sql`insert into path_signatures (cache_id, hash_part, cached_path_id, signature) values (${cacheId}, ${part}, ${path!.id}, ${`main:${i}`})`;
  }
}

t.test('lookups asked for in one turn share one query', async (t) => {
  const { sql } = await testDatabase(t);
  const dir = t.testdir();
  const cache = await createTestCache(sql, 'main', { baseDir: dir });
  await signedPaths(sql, cache.id, hashes.slice(0, 3));
  const { watch, sql: counted } = watched(sql);
  const fetches = fetchRecorder(sql, pino({ level: 'silent' }));
  t.teardown(() => fetches.close());
  const reads = narReads({ sql: counted, blobs: new FilesystemBlobStore(join(dir, 'blobs')), hot: new HotCache<HotValue>(1 << 20), fetches, gate: new StorageReadGate({ maxReads: 4, maxReadsPerWorker: 2, openTimeoutSecs: 60 }), smallBytes: 1 << 20 });

  const found = await Promise.all(hashes.map((part) => reads.narinfo(cache.id, part)));
  t.same(found.map((text) => (text === null ? null : /^StorePath: .*-(p\d)$/m.exec(text.toString())![1])), ['p0', 'p1', 'p2', null, null], 'three paths and two misses');
  t.equal(watch.statements, 1, 'one query for the five');
  t.same(hashes.map((part) => reads.narinfoInMemory(cache.id, part) === undefined), [false, false, false, false, false], 'all five kept');
  await Promise.all(hashes.slice(0, 2).map((part) => reads.narinfo(cache.id, part)));
  t.equal(watch.statements, 1, 'answered from memory after');
});

t.test('a lookup under way when its path is forgotten is not kept', async (t) => {
  const { sql } = await testDatabase(t);
  const dir = t.testdir();
  const cache = await createTestCache(sql, 'main', { baseDir: dir });
  const { watch, sql: gated } = watched(sql);
  const fetches = fetchRecorder(sql, pino({ level: 'silent' }));
  t.teardown(() => fetches.close());
  const reads = narReads({ sql: gated, blobs: new FilesystemBlobStore(join(dir, 'blobs')), hot: new HotCache<HotValue>(1 << 20), fetches, gate: new StorageReadGate({ maxReads: 4, maxReadsPerWorker: 2, openTimeoutSecs: 60 }), smallBytes: 1 << 20 });
  let open = (): void => undefined;
  watch.hold = new Promise<void>((resolve) => (open = resolve));
  const ran = new Promise<void>((resolve) => (watch.ran = resolve));

  // The lookup finds no path; before its answer is handed over, the path is uploaded through this process.
  const looked = reads.narinfo(cache.id, hashes[0]!);
  await ran;
  await signedPaths(sql, cache.id, hashes.slice(0, 1));
  reads.forget(cache.id, hashes[0]!);
  // a read after the forget does not join the lookup under way: it asks again (review)
  const after = reads.narinfo(cache.id, hashes[0]!);
  open();
  t.equal(await looked, null, 'the lookup answers what it found (it raced the upload)');
  t.match((await after)?.toString(), /^Sig: main:0$/m, 'the read after the forget finds the upload');
  watch.hold = null;
  t.match(reads.narinfoInMemory(cache.id, hashes[0]!)?.toString(), /^Sig: main:0$/m, 'and what it found is kept, not the raced miss');
});
