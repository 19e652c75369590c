// The upkeep passes other than the sign sweep (test/http/cache/keyRotation.test.ts has that one),
// on one server with a stepped clock: the debug build-ID index (uploads indexed at once, the
// backfill, debuginfo/{build_id} in the format Nix's own index-debug-info writes), the build graph
// consistency check repairing outputs_cached, and retentionDays on sessions and worker connections.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { startTestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { steppedClock } from '../../support/clock.js';
import { nixOk } from '../../support/nixClient.js';
import { tempDir } from '../../support/nixStore.js';
import { localNar, uploadChunked } from '../../support/narUploads.js';

const DAY_MS = 86_400_000;
const BUILD_ID = `ab${'0123456789abcdef01234567890abcdef01234'.slice(0, 38)}`;

t.test('upkeep passes', async (t) => {
  const clock = steppedClock(new Date());
  // Passes run by hand here: a step of the clock must not also start them on their timers.
  const kiln = await startTestKiln(t, { retentionDays: 30 }, { clock, upkeepTimers: false });
  const ada = await signUp(kiln, 'ada');

  t.test('debug build-ID index: uploads at once, the backfill, debuginfo/{build_id}', async (t) => {
    const dir = tempDir('kiln-debug-');
    writeFileSync(join(dir, 'dbg.nix'), `derivation { name = "kiln-fixture-debug"; builder = "/bin/sh"; system = builtins.currentSystem;
      PATH = "/bin:/usr/bin"; args = [ "-c" ''
        mkdir -p $out/lib/debug/.build-id/${BUILD_ID.slice(0, 2)} $out/lib/debug/.build-id/zz $out/lib/debug/.build-id/cd
        echo symbols > $out/lib/debug/.build-id/${BUILD_ID.slice(0, 2)}/${BUILD_ID.slice(2)}.debug
        echo not-hex > $out/lib/debug/.build-id/zz/${BUILD_ID.slice(2)}.debug
        echo short > $out/lib/debug/.build-id/cd/0123.debug
        ln -s ../ab/${BUILD_ID.slice(2)}.debug $out/lib/debug/.build-id/cd/${'1'.repeat(38)}.debug
      '' ]; }`);
    const path = (await nixOk('nix-build', [join(dir, 'dbg.nix'), '--no-out-link'])).trim();
    const cache = await createTestCache(kiln.sql, 'dbg', { public: true, ownerId: ada.id });
    await createTestCache(kiln.sql, 'other', { public: true, ownerId: ada.id });
    const up = await uploadChunked(kiln, ada.token, 'dbg', localNar(path));
    t.equal(up.status, 200, JSON.stringify(up.body));

    // What Nix 2.8 itself writes for this path with index-debug-info, to compare with.
    const fileCache = tempDir('kiln-nix-debuginfo-');
    await nixOk('nix', ['copy', '--to', `file://${fileCache}?index-debug-info=true&compression=zstd`, path]);
    // Nix 2.8 names the document <build id>.debug; kiln serves that name and the bare build ID.
    const nixDoc = JSON.parse(readFileSync(join(fileCache, 'debuginfo', `${BUILD_ID}.debug`), 'utf8')) as { archive: string; member: string };

    const get = (cacheName: string, id: string) => fetch(`${kiln.url}/cache/${cacheName}/debuginfo/${id}`);
    const found = await get('dbg', BUILD_ID);
    t.equal(found.status, 200);
    t.match(found.headers.get('content-type'), /^application\/json/);
    const doc = await found.json() as { archive: string; member: string };
    t.equal(doc.member, nixDoc.member, 'the member as Nix names it');
    t.match(doc.archive, /^\.\.\/nar\/[0-9a-z]{52}\.nar\.zst$/, 'the archive relative to debuginfo/, as Nix writes it');
    const nar = await fetch(new URL(doc.archive, `${kiln.url}/cache/dbg/debuginfo/${BUILD_ID}`));
    t.equal(nar.status, 200, 'the archive URL serves the NAR');
    await nar.arrayBuffer();

    const suffixed = await get('dbg', `${BUILD_ID}.debug`);
    t.same(await suffixed.json(), doc, 'the name Nix 2.8 writes answers the same');
    t.equal((await get('other', BUILD_ID)).status, 404, 'a cache that does not hold the path has no debug info for it');
    for (const bad of [`zz${BUILD_ID.slice(2)}`, '0123', '1'.repeat(40), BUILD_ID.toUpperCase(), `${BUILD_ID}0`, `${BUILD_ID}.debug.debug`, '..%2f..%2fetc']) {
      t.equal((await get('dbg', bad)).status, 404, `nothing for ${bad}`);
    }
    const indexed = await kiln.sql<{ build_id: string }[]>`select build_id from debug_build_ids`;
    t.same(indexed.map((r) => r.build_id), [BUILD_ID], 'only the well-formed regular file is indexed');

    // Paths stored before the index existed: the backfill finds them.
    await kiln.sql`delete from debug_build_ids`;
    await kiln.sql`update cached_paths set debug_indexed = false`;
    t.equal((await get('dbg', BUILD_ID)).status, 404);
    const report = await kiln.upkeep.debugIndex();
    t.same(report, { paths: 1, buildIds: 1 });
    t.equal((await get('dbg', BUILD_ID)).status, 200, 'found after the backfill');
    t.same(await kiln.upkeep.debugIndex(), { paths: 0, buildIds: 0 }, 'nothing twice');
    t.ok(cache.id);
  });

  t.test('graph consistency: finished builds whose outputs no cache holds are marked not cached', async (t) => {
    const cache = await createTestCache(kiln.sql, 'graph', { public: true, ownerId: ada.id });
    const hash = (c: string) => c.repeat(32);
    const held = `/nix/store/${hash('a')}-held`;
    const [path] = await kiln.sql<{ id: string }[]>`
      insert into cached_paths (hash_part, store_path, nar_hash, nar_size, file_hash, file_size, listing)
      values (${hash('a')}, ${held}, 'sha256:x', 1, ${'1'.repeat(52)}, 1, '{}') returning id`;
    await kiln.sql`insert into path_signatures (cache_id, hash_part, cached_path_id, signature) values (${cache.id}, ${hash('a')}, ${path!.id}, 'k-1:x')`;
    const build = async (name: string, outputs: Record<string, string | null>, status: string, outputsCached = true): Promise<string> => {
      const [d] = await kiln.sql<{ id: string }[]>`
        insert into derivations (drv_path, name, system, outputs) values (${`/nix/store/${hash('d')}-${name}.drv`}, ${name}, 'x86_64-linux', ${kiln.sql.json(outputs)}) returning id`;
      const [b] = await kiln.sql<{ id: string }[]>`
        insert into derivation_builds (derivation_id, status, outputs_cached) values (${d!.id}, ${status}, ${outputsCached}) returning id`;
      return b!.id;
    };
    const ids = {
      held: await build('held', { out: held }, 'completed'),
      lost: await build('lost', { out: `/nix/store/${hash('b')}-lost` }, 'completed'),
      halfLost: await build('half', { out: held, dev: `/nix/store/${hash('c')}-half-dev` }, 'substituted'),
      floating: await build('floating', { out: null }, 'completed'),
      queued: await build('queued', { out: `/nix/store/${hash('f')}-queued` }, 'queued'),
    };
    const report = await kiln.upkeep.graphConsistency();
    t.same(report, { checked: 4, repaired: 2 });
    const rows = await kiln.sql<{ id: string; outputs_cached: boolean }[]>`select id, outputs_cached from derivation_builds`;
    const cached = Object.fromEntries(rows.map((r) => [r.id, r.outputs_cached]));
    t.same(
      Object.fromEntries(Object.entries(ids).map(([k, id]) => [k, cached[id]])),
      { held: true, lost: false, halfLost: false, floating: true, queued: true },
    );
    t.same(await kiln.upkeep.graphConsistency(), { checked: 4, repaired: 0 }, 'a second check finds nothing');

    // Deleting the whole cache cascades its signature rows without marking anything: the check does.
    await kiln.sql`delete from caches where id = ${cache.id}`;
    t.same(await kiln.upkeep.graphConsistency(), { checked: 4, repaired: 1 });
  });

  t.test('retentionDays: sessions, worker connection history, Git host delivery ids and collection runs', async (t) => {
    const now = clock.now().getTime();
    const ago = (days: number) => new Date(now - days * DAY_MS);
    const session = async (created: Date, expires: Date, revoked: Date | null): Promise<string> => {
      const [row] = await kiln.sql<{ id: string }[]>`
        insert into sessions (user_id, created_at, expires_at, revoked_at) values (${ada.id}, ${created}, ${expires}, ${revoked}) returning id`;
      return row!.id;
    };
    const sessions = {
      expiredLongAgo: await session(ago(60), ago(31), null),
      expiredRecently: await session(ago(40), ago(29), null),
      revokedLongAgo: await session(ago(40), ago(-300), ago(31)),
      live: await session(ago(1), ago(-13), null),
    };
    const worker = '00000000-0000-4000-8000-000000000001';
    const lonely = '00000000-0000-4000-8000-000000000002';
    const connection = async (workerId: string, connected: Date, lastSeen: Date, closed: Date | null): Promise<string> => {
      const [row] = await kiln.sql<{ id: string }[]>`
        insert into worker_connections (worker_id, hello, connected_at, last_seen_at, disconnected_at)
        values (${workerId}, '{}', ${connected}, ${lastSeen}, ${closed}) returning id`;
      return row!.id;
    };
    const connections = {
      closedLongAgo: await connection(worker, ago(50), ago(40), ago(40)),
      closedRecently: await connection(worker, ago(50), ago(10), ago(10)),
      openSuperseded: await connection(worker, ago(45), ago(35), null),
      current: await connection(worker, ago(2), ago(0), null),
      openNeverBack: await connection(lonely, ago(100), ago(90), null),
    };
    const delivery = async (id: string, received: Date): Promise<void> => {
      await kiln.sql`insert into git_host_deliveries (id, event, received_at) values (${id}, 'push', ${received})`;
    };
    await delivery('d-old', ago(31));
    await delivery('d-recent', ago(29));
    // Collection runs ("finished admin tasks"): ended ones go after retentionDays, but the newest
    // ended run of each kind stays (the schedule counts from it); open ones are never touched.
    const gcRun = async (kind: 'pass' | 'deep', state: string, finished: Date | null): Promise<string> => {
      const [row] = await kiln.sql<{ id: string }[]>`
        insert into gc_runs (kind, state, requested_at, started_at, finished_at) values (${kind}, ${state}, ${ago(100)}, ${ago(100)}, ${finished}) returning id`;
      return row!.id;
    };
    const runs = {
      passOld: await gcRun('pass', 'finished', ago(50)),
      passFailedOld: await gcRun('pass', 'failed', ago(45)),
      passRecent: await gcRun('pass', 'finished', ago(1)),
      deepOld: await gcRun('deep', 'finished', ago(60)),
      deepNewestButOld: await gcRun('deep', 'failed', ago(40)),
      requested: await gcRun('deep', 'requested', null),
    };
    t.same(await kiln.upkeep.retention(), { sessions: 2, workerConnections: 2, gitHostDeliveries: 1, buildSamples: 0, clusterJobs: 0, gcRuns: 3 });
    const keptRuns = (await kiln.sql<{ id: string }[]>`select id from gc_runs`).map((r) => r.id).sort();
    t.same(keptRuns, [runs.passRecent, runs.deepNewestButOld, runs.requested].sort(), 'the newest ended run of each kind stays, however old');
    t.same((await kiln.sql<{ id: string }[]>`select id from git_host_deliveries`).map((r) => r.id), ['d-recent'], 'a delivery id goes 30 days after it arrived');
    const keptSessions = (await kiln.sql<{ id: string }[]>`select id from sessions where id = any(${Object.values(sessions)}::uuid[])`).map((r) => r.id).sort();
    t.same(keptSessions, [sessions.expiredRecently, sessions.live].sort());
    const keptConnections = (await kiln.sql<{ id: string }[]>`select id from worker_connections`).map((r) => r.id).sort();
    t.same(keptConnections, [connections.closedRecently, connections.current, connections.openNeverBack].sort(),
      'an open connection stays until the worker connects again');
    t.same(await kiln.upkeep.retention(), { sessions: 0, workerConnections: 0, gitHostDeliveries: 0, buildSamples: 0, clusterJobs: 0, gcRuns: 0 });
    clock.step(2 * DAY_MS);
    t.same(await kiln.upkeep.retention(), { sessions: 1, workerConnections: 0, gitHostDeliveries: 1, buildSamples: 0, clusterJobs: 0, gcRuns: 0 }, 'the recently expired session and delivery id go once 30 days past');
  });
});
