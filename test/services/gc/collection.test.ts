// Garbage collection against a real server and database (issue 20, docs/gc.md): the live set of
// retained evaluations (newest keep_evaluations per task, open ones unless wedged) and the runtime
// closure of their outputs, the NAR TTL with per-cache overrides, pins, storage-limit eviction in a
// pass and at upload time, orphan derivations, the superuser's runs, the collector's lock, the deep
// round and its pace; the TTL from the last fetch, cache.maxStorageGb across caches, and an
// evaluation recorded while a pass runs. The services' clock is stepped; nothing sleeps.
import t from 'tap';
import { GcRunView, PinPage, PinView } from '../../../protocol/index.js';
import { GarbageCollector } from '../../../services/gc/index.js';
import { narBlobKey } from '../../../storage/index.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { steppedClock } from '../../support/clock.js';
import { startTestKiln } from '../../support/kiln.js';
import { insertProject } from '../../support/modelRows.js';
import { makeTestNar, type TestNar } from '../../support/narStorage.js';
import { uploadSingle } from '../../support/narUploads.js';
import { outboxReader } from '../../support/outboxEvents.js';

const HOUR = 3600_000;
const clock = steppedClock(new Date());

const infoOf = (nar: TestNar, deriver?: string) => ({
  store_path: nar.info.storePath, nar_hash: nar.info.narHash, nar_size: nar.info.narSize, references: nar.info.references,
  ...(deriver === undefined ? {} : { deriver }),
});

const gcConfig = {
  'gc.narTtlHours': 10, 'gc.narUploadGraceHours': 1, 'gc.orphanDerivationHours': 5, 'gc.wedgedEvalHours': 24,
  'gc.intervalSecs': 3600, 'gc.deepIntervalSecs': 0, 'gc.deepPaceMs': 250, 'eval.maxKeep': 2, 'cache.maxStorageGb': 0,
};

t.test('garbage collection', async (t) => {
  const kiln = await startTestKiln(t, gcConfig, { clock });
  const ada = await signUp(kiln, 'ada');
  await kiln.sql`update users set superuser = true where id = ${ada.id}`;
  const bob = await signUp(kiln, 'bob');
  await kiln.sql`update users set superuser = false where id = ${bob.id}`;
  const main = await createTestCache(kiln.sql, 'main', { ownerId: ada.id, public: true });
  await createTestCache(kiln.sql, 'forever', { ownerId: ada.id, public: true });
  const projectId = await insertProject(kiln.sql, 'acme', 'app');
  const [task] = await kiln.sql<{ id: string }[]>`insert into tasks (project_id, name) values (${projectId}, 'default') returning id`;
  // The project writes to main: its evaluations keep their closures alive there (and nowhere else).
  await kiln.sql`insert into subscriptions (project_id, cache_id, mode) values (${projectId}, ${main.id}, 0)`;
  const outbox = outboxReader(kiln.sql);

  const upload = async (cache: string, nar: TestNar, deriver?: string) => {
    const res = await uploadSingle(kiln, ada.token, cache, { narinfo: infoOf(nar, deriver), nar: nar.nar });
    t.equal(res.status, 200, `uploaded ${nar.info.storePath} into ${cache}: ${JSON.stringify(res.body)}`);
  };
  const narinfo = async (cache: string, nar: TestNar) => (await fetch(`${kiln.url}/cache/${cache}/${nar.hash}.narinfo`)).status;
  const held = async (cache: string, nar: TestNar) => (await kiln.sql`
    select 1 from path_signatures s join caches c on c.id = s.cache_id where c.name = ${cache} and s.hash_part = ${nar.hash}`).length === 1;
  /** An evaluation of the task with one build of a derivation whose output is `output`; the derivation's id. */
  const evaluation = async (output: TestNar, phase: string, createdAgoHours: number, updatedAgoHours = createdAgoHours, taskId = task!.id) => {
    const [e] = await kiln.sql<{ id: string }[]>`
      insert into evaluations (task_id, repository, wildcard, phase, created_at, updated_at)
      values (${taskId}, 'file:///nonexistent', '*', ${phase}, now() - make_interval(hours => ${createdAgoHours}), now() - make_interval(hours => ${updatedAgoHours}))
      returning id`;
    const drvName = `${output.hash.replace(/^..../, 'zzzz')}-${output.info.storePath.split('-').slice(1).join('-')}.drv`;
    const [d] = await kiln.sql<{ id: string }[]>`insert into derivations (drv_path, name, system, outputs)
      values (${`/nix/store/${drvName}`}, 'x', 'x86_64-linux', ${kiln.sql.json({ out: output.info.storePath })}) returning id`;
    const [b] = await kiln.sql<{ id: string }[]>`insert into derivation_builds (derivation_id, status, finished_at, log_bytes) values (${d!.id}, 'completed', now(), 5) returning id`;
    await kiln.sql`insert into build_log_chunks (derivation_build_id, attempt, seq, data) values (${b!.id}, 1, 0, ${Buffer.from('hello')})`;
    await kiln.sql`insert into builds (evaluation_id, derivation_build_id, entry_point, attr) values (${e!.id}, ${b!.id}, true, 'packages.x')`;
    return { evaluationId: e!.id, derivationId: d!.id, drvName };
  };

  // The newest evaluation's output refers to a dependency: both are live (runtime closure).
  const dep = await makeTestNar(t, { f: 'a dependency\n' }, [], 'dep');
  const live = await makeTestNar(t, { f: `uses ${dep.info.storePath}\n` }, [`${dep.hash}-dep`], 'live');
  const second = await makeTestNar(t, { f: 'the second newest evaluation\n' }, [], 'second');
  const old = await makeTestNar(t, { f: 'an evaluation past keep_evaluations\n' }, [], 'old');
  const wedged = await makeTestNar(t, { f: 'an evaluation stuck evaluating\n' }, [], 'wedged');
  const running = await makeTestNar(t, { f: 'an evaluation still building\n' }, [], 'running');
  const loose = await makeTestNar(t, { f: 'no evaluation needs me\n' }, [], 'loose');
  const pinnedDep = await makeTestNar(t, { f: 'under a pin\n' }, [], 'pinned-dep');
  const pinned = await makeTestNar(t, { f: `pinned ${pinnedDep.info.storePath}\n` }, [`${pinnedDep.hash}-pinned-dep`], 'pinned');
  const kept = await makeTestNar(t, { f: 'in a keep-forever cache\n' }, [], 'kept');

  const evOld = await evaluation(old, 'completed', 30);
  await evaluation(second, 'completed', 20);
  const evLive = await evaluation(live, 'completed', 10);
  // Both still building; one has not moved for longer than gc.wedgedEvalHours.
  const evWedged = await evaluation(wedged, 'building', 40, 30);
  await evaluation(running, 'building', 40, 2);
  for (const nar of [dep, live, second, wedged, running, loose, pinnedDep, pinned]) await upload('main', nar);
  await upload('main', old, evOld.drvName);
  await upload('forever', kept);
  await upload('forever', loose);

  t.test('settings: per-cache TTL and keep_forever on PATCH /caches/{cache}', async (t) => {
    const res = await kiln.api<{ keep_forever: boolean; nar_ttl_hours: number | null }>('PATCH', '/caches/forever', { token: ada.token, body: { keep_forever: true } });
    t.equal(res.status, 200);
    t.match(res.message, { keep_forever: true, nar_ttl_hours: null });
    const bad = await kiln.api('PATCH', '/caches/forever', { token: ada.token, body: { nar_ttl_hours: -1 } });
    t.equal(bad.status, 400, 'a negative TTL is refused');
    const ttl = await kiln.api<{ nar_ttl_hours: number | null }>('PATCH', '/caches/main', { token: ada.token, body: { nar_ttl_hours: 6 } });
    t.equal(ttl.message.nar_ttl_hours, 6);
  });

  t.test('pins: PUT, GET, DELETE, expiry and refusals', async (t) => {
    const put = await kiln.api<PinView>('PUT', `/caches/main/pins/${pinned.hash}`, { token: ada.token, body: {} });
    t.equal(put.status, 200, JSON.stringify(put));
    t.match(PinView.parse(put.message), { hash: pinned.hash, store_path: pinned.info.storePath, created_by: 'ada', expires_at: null, expired: false });
    const expiring = await kiln.api<PinView>('PUT', `/caches/main/pins/${loose.hash}`, { token: ada.token, body: { expires_in_hours: 1 } });
    t.equal(expiring.status, 200);
    t.ok(expiring.message.expires_at, 'an expiry');
    const list = await kiln.api<PinPage>('GET', '/caches/main/pins', { token: bob.token });
    t.equal(list.status, 200, 'anyone who sees the public cache lists its pins');
    t.same(PinPage.parse(list.message).pins.map((p) => p.hash).sort(), [loose.hash, pinned.hash].sort());
    t.equal((await kiln.api('PUT', `/caches/main/pins/${pinned.hash}`, { token: bob.token, body: {} })).status, 403, 'pinning needs writeStore');
    t.equal((await kiln.api('PUT', `/caches/main/pins/${'0'.repeat(32)}`, { token: ada.token, body: {} })).status, 404, 'a path the cache does not hold');
    t.equal((await kiln.api('PUT', `/caches/main/pins/not-a-hash`, { token: ada.token, body: {} })).status, 400);
    const past = await kiln.api<unknown>('PUT', `/caches/main/pins/${pinned.hash}`, { token: ada.token, body: { expires_at: new Date(clock.now().getTime() - HOUR).toISOString() } });
    t.equal(past.status, 400, 'an expiry in the past');
    const both = await kiln.api('PUT', `/caches/main/pins/${pinned.hash}`, { token: ada.token, body: { expires_at: new Date(clock.now().getTime() + HOUR).toISOString(), expires_in_hours: 2 } });
    t.equal(both.status, 400, 'expires_at and expires_in_hours together');
    t.equal((await kiln.api('DELETE', `/caches/main/pins/${dep.hash}`, { token: ada.token })).status, 404, 'no pin to delete');
  });

  t.test('a pass: live set, runtime closure, pins, TTL, overrides, events', async (t) => {
    t.same(await kiln.gc.tick(), [], 'nothing is due before gc.intervalSecs');
    clock.step(12 * HOUR);
    t.same(await kiln.gc.tick(), ['pass']);
    for (const nar of [dep, live, second, running, pinned, pinnedDep]) {
      t.ok(await held('main', nar), `${nar.info.storePath} stays`);
      t.equal(await narinfo('main', nar), 200);
    }
    for (const nar of [old, wedged, loose]) {
      t.notOk(await held('main', nar), `${nar.info.storePath} is collected`);
      t.equal(await narinfo('main', nar), 404, 'its narinfo answers 404');
    }
    t.ok(await held('forever', kept), 'a keep_forever cache keeps what no evaluation needs');
    t.ok(await held('forever', loose), 'collected from one cache, kept in another');
    const [built] = await kiln.sql<{ outputs_cached: boolean }[]>`
      select outputs_cached from derivation_builds where derivation_id = ${evOld.derivationId}`;
    t.equal(built?.outputs_cached, false, 'the output of a collected last copy is marked not cached');
    const swept = (await outbox()).filter((e) => e.event === 'gc.swept');
    t.match(swept, [{ content: { cache: 'main', reason: 'ttl', paths: 3 }, scope: { cache_id: main.id } }]);
    const [orphans] = await kiln.sql<{ n: number }[]>`select count(*)::int as n from derivations where orphaned_since is not null`;
    t.equal(orphans?.n, 2, 'the derivations of the pruned and the wedged evaluation are marked orphans');
  });

  t.test('the superuser requests a pass; orphan derivations go after gc.orphanDerivationHours', async (t) => {
    t.equal((await kiln.api('POST', '/admin/gc', { token: bob.token, body: {} })).status, 403);
    t.equal((await kiln.api('GET', '/admin/gc', { token: bob.token })).status, 403);
    t.equal((await kiln.api('POST', '/admin/gc', { token: ada.token, body: { deep: 'yes' } })).status, 400);
    clock.step(6 * HOUR);
    const requested = await kiln.api<GcRunView>('POST', '/admin/gc', { token: ada.token, body: {} });
    t.equal(requested.status, 202);
    t.match(GcRunView.parse(requested.message), { kind: 'pass', state: 'requested' });
    t.same(await kiln.gc.tick(), ['pass']);
    const run = await kiln.api<GcRunView>('GET', `/admin/gc/${requested.message.id}`, { token: ada.token });
    t.match(run.message, { state: 'finished', result: { derivations: 2, log_bytes: 10 } });
    t.equal((await kiln.api('GET', '/admin/gc/nope', { token: ada.token })).status, 400);
    t.equal((await kiln.api('GET', '/admin/gc/999999', { token: ada.token })).status, 404);
    const remaining = await kiln.sql`select 1 from derivations where id in ${kiln.sql([evOld.derivationId, evWedged.derivationId])}`;
    t.equal(remaining.length, 0, 'deleted');
    const logs = await kiln.sql`select 1 from build_log_chunks c join derivation_builds db on db.id = c.derivation_build_id where db.derivation_id = ${evLive.derivationId}`;
    t.equal(logs.length, 1, 'a live derivation keeps its build and log');
    t.match((await outbox()).filter((e) => e.event === 'gc.swept'), [{ content: { reason: 'derivations', paths: 2, bytes: 10 } }]);
    const recent = await kiln.api<{ runs: GcRunView[] }>('GET', '/admin/gc', { token: ada.token });
    t.same(recent.message.runs.map((r) => r.state), ['finished', 'finished']);
  });

  t.test('an expired pin protects nothing; unpinning leaves the path to the TTL', async (t) => {
    const paths = [pinned, pinnedDep];
    t.equal((await kiln.api('DELETE', `/caches/main/pins/${pinned.hash}`, { token: ada.token })).status, 200);
    await kiln.api('POST', '/admin/gc', { token: ada.token, body: {} });
    t.same(await kiln.gc.tick(), ['pass']);
    for (const nar of paths) t.notOk(await held('main', nar), `${nar.info.storePath} is collected once unpinned`);
  });

  t.test('tenants: an evaluation keeps paths alive only in the caches its project writes to', async (t) => {
    // eve's project writes to her own cache and only reads main; ada's second project writes to main.
    const eve = await signUp(kiln, 'eve');
    const eveCache = await createTestCache(kiln.sql, 'eves', { ownerId: eve.id, public: true });
    const eveProject = await insertProject(kiln.sql, 'eveorg', 'app');
    const [eveTask] = await kiln.sql<{ id: string }[]>`insert into tasks (project_id, name) values (${eveProject}, 'default') returning id`;
    await kiln.sql`insert into subscriptions (project_id, cache_id, mode) values (${eveProject}, ${eveCache.id}, 0), (${eveProject}, ${main.id}, 1)`;
    const adaProject = await insertProject(kiln.sql, 'acme', 'other');
    const [adaTask] = await kiln.sql<{ id: string }[]>`insert into tasks (project_id, name) values (${adaProject}, 'default') returning id`;
    const [org] = await kiln.sql<{ organization_id: string }[]>`select organization_id from projects where id = ${adaProject}`;
    // An organization's write subscription counts for its projects.
    await kiln.sql`insert into subscriptions (organization_id, cache_id, mode) values (${org!.organization_id}, ${main.id}, 2) on conflict do nothing`;

    const victim = await makeTestNar(t, { f: 'ada uploaded me; only eve names me\n' }, [], 'victim');
    const shared = await makeTestNar(t, { f: 'in both caches; only ada names me\n' }, [], 'shared');
    const evesOwn = await makeTestNar(t, { f: 'eve names me in her cache\n' }, [], 'eves-own');
    await upload('main', victim);
    await upload('main', shared);
    const eveUpload = async (nar: TestNar) => {
      const res = await uploadSingle(kiln, eve.token, 'eves', { narinfo: infoOf(nar), nar: nar.nar });
      t.equal(res.status, 200, JSON.stringify(res.body));
    };
    await eveUpload(shared);
    await eveUpload(evesOwn);
    await evaluation(victim, 'completed', 1, 1, eveTask!.id);
    await evaluation(evesOwn, 'completed', 1, 1, eveTask!.id);
    await evaluation(shared, 'completed', 1, 1, adaTask!.id);
    // Everything here is past every TTL by the clock (main: 6 h, eves: 10 h, plus the grace).
    clock.step(12 * HOUR);
    await kiln.api('POST', '/admin/gc', { token: ada.token, body: {} });
    t.same(await kiln.gc.tick(), ['pass']);
    t.notOk(await held('main', victim), "eve's evaluation does not keep a path alive in a cache she only reads");
    t.ok(await held('main', shared), "ada's evaluation keeps its path in main (her organization writes to it)");
    t.notOk(await held('eves', shared), "ada's evaluation does not keep eve's copy of the same path");
    t.ok(await held('eves', evesOwn), "eve's evaluation keeps its path in her own cache");
  });

  t.test('storage limits: a pass evicts the least recently used; an upload makes room', async (t) => {
    const small = await createTestCache(kiln.sql, 'small', { ownerId: ada.id, public: true });
    await kiln.api('PATCH', '/caches/small', { token: ada.token, body: { keep_forever: true } });
    const nars = [];
    for (const name of ['a', 'b', 'c', 'd']) nars.push(await makeTestNar(t, { f: `limited ${name}\n`.repeat(40) }, [], `lru-${name}`));
    const [a, b, c, d] = nars as [TestNar, TestNar, TestNar, TestNar];
    for (const nar of [a, b, c]) await upload('small', nar);
    // a was fetched last, c never (uploaded last), b fetched long ago: b is the least recently used.
    await kiln.sql`update path_signatures set last_fetched_at = now() - interval '1 hour' where cache_id = ${small.id} and hash_part = ${a.hash}`;
    await kiln.sql`update path_signatures set last_fetched_at = now() - interval '3 hours' where cache_id = ${small.id} and hash_part = ${b.hash}`;
    await kiln.sql`update path_signatures set created_at = now() - interval '2 hours' where cache_id = ${small.id} and hash_part = ${c.hash}`;
    const [used] = await kiln.sql<{ used: string; one: string }[]>`
      select sum(p.file_size) as used, max(p.file_size) as one from path_signatures s join cached_paths p on p.id = s.cached_path_id where s.cache_id = ${small.id}`;
    await kiln.api('PATCH', '/caches/small', { token: ada.token, body: { max_storage_bytes: Number(used!.used) - 1 } });
    await kiln.api('POST', '/admin/gc', { token: ada.token, body: {} });
    t.same(await kiln.gc.tick(), ['pass']);
    t.notOk(await held('small', b), 'the least recently used path went');
    t.ok(await held('small', a), 'recently fetched stays');
    t.ok(await held('small', c), 'the next least recently used stays: the cache is under its limit');
    t.match((await outbox()).filter((e) => e.event === 'gc.swept' && e.content['cache'] === 'small'), [{ content: { cache: 'small', reason: 'storage', paths: 1 } }]);

    // Nearly full now: the upload of d (checked against its NarSize) evicts c, the least recently used, instead of refusing.
    const [now] = await kiln.sql<{ used: string }[]>`
      select sum(p.file_size) as used from path_signatures s join cached_paths p on p.id = s.cached_path_id where s.cache_id = ${small.id}`;
    await kiln.api('PATCH', '/caches/small', { token: ada.token, body: { max_storage_bytes: Number(now!.used) + d.info.narSize - 100 } });
    await upload('small', d);
    t.notOk(await held('small', c), 'the upload made room by evicting the least recently used path');
    t.ok(await held('small', a), 'only as much as the upload needs');
    t.ok(await held('small', d));
    // With everything pinned nothing is collectable: cache_full.
    for (const nar of [a, d]) t.equal((await kiln.api('PUT', `/caches/small/pins/${nar.hash}`, { token: ada.token, body: {} })).status, 200);
    const refused = await uploadSingle(kiln, ada.token, 'small', { narinfo: infoOf(b), nar: b.nar });
    t.equal(refused.status, 413);
    t.equal(refused.body.code, 'cache_full');
  });

  t.test('one collector per database: the lock', async (t) => {
    const other = new GarbageCollector({ sql: kiln.db.web, config: gcConfig, log: kiln.log, events: kiln.events.events, nars: kiln.nars, clock });
    t.teardown(() => other.stop());
    await kiln.api('POST', '/admin/gc', { token: ada.token, body: {} });
    t.same(await other.tick(), [], 'another process does nothing while the lock is held');
    t.notOk(other.isLeader);
    t.same(await kiln.gc.tick(), ['pass']);
  });

  t.test('a deep round: a row whose blob is gone loses its copies; a background round is paced', async (t) => {
    const lost = await makeTestNar(t, { f: 'my blob will vanish\n' }, [], 'lost');
    await upload('main', lost);
    await kiln.api('PUT', `/caches/main/pins/${lost.hash}`, { token: ada.token, body: {} });
    const [row] = await kiln.sql<{ file_hash: string }[]>`select file_hash from cached_paths where hash_part = ${lost.hash}`;
    await kiln.nars.blobs.delete(narBlobKey(row!.file_hash));
    const pauses: number[] = [];
    await kiln.gc.stop();
    const deep = new GarbageCollector(
      { sql: kiln.db.web, config: { ...gcConfig, 'gc.deepIntervalSecs': 60 }, log: kiln.log, events: kiln.events.events, nars: kiln.nars, clock, pause: async (ms) => { pauses.push(ms); } },
      { loop: false },
    );
    t.teardown(() => deep.stop());
    clock.step(2 * 60_000);
    t.same(await deep.tick(), ['deep'], 'a background deep round gc.deepIntervalSecs after the collector started (the pass is not due)');
    t.notOk(await held('main', lost), 'a row without its blob is removed, pinned or not');
    t.equal(await narinfo('main', lost), 404);
    t.ok(pauses.length >= 1 && pauses.every((ms) => ms === 250), 'gc.deepPaceMs between units of a background round');
    const events = (await outbox()).map((e) => e.event);
    t.ok(events.includes('gc.deep_started') && events.includes('gc.deep_finished'));
    pauses.length = 0;
    await kiln.api('POST', '/admin/gc', { token: ada.token, body: { deep: true } });
    t.same(await deep.tick(), ['deep']);
    t.same(pauses, [], 'a requested round runs without pause');
  });

  t.test('the TTL counts from the last fetch; cache.maxStorageGb evicts across caches; an evaluation recorded during the pass keeps its paths', async (t) => {
    const vault = await createTestCache(kiln.sql, 'vault', { ownerId: ada.id, public: true });
    t.equal((await kiln.api('PATCH', '/caches/vault', { token: ada.token, body: { keep_forever: true } })).status, 200);
    // acme/app writes to vault too: its evaluations keep their paths alive there.
    await kiln.sql`insert into subscriptions (project_id, cache_id, mode) values (${projectId}, ${vault.id}, 0)`;
    const [forever] = await kiln.sql<{ id: string }[]>`select id from caches where name = 'forever'`;

    // TTL (main: 6 h + 1 h grace): both uploaded long ago; one fetched an hour ago, one 8 hours ago.
    const fetchedLately = await makeTestNar(t, { f: 'uploaded long ago, fetched lately\n' }, [], 'fetched-lately');
    const fetchedLongAgo = await makeTestNar(t, { f: 'uploaded long ago, fetched long ago\n' }, [], 'fetched-long-ago');
    for (const nar of [fetchedLately, fetchedLongAgo]) await upload('main', nar);
    const hoursAgo = (h: number) => new Date(clock.now().getTime() - h * HOUR);
    await kiln.sql`update path_signatures set created_at = ${hoursAgo(100)}, last_fetched_at = ${hoursAgo(1)} where cache_id = ${main.id} and hash_part = ${fetchedLately.hash}`;
    await kiln.sql`update path_signatures set created_at = ${hoursAgo(100)}, last_fetched_at = ${hoursAgo(8)} where cache_id = ${main.id} and hash_part = ${fetchedLongAgo.hash}`;

    // The instance limit (1 GiB): four synthetic copies of 0.45 GiB in two keep_forever caches
    // (the TTL never takes them), least recently used first: a (pinned), b, c, d.
    const size = Math.round(0.45 * 2 ** 30);
    const synthetic = async (cacheId: string, c: string, name: string, uploaded: Date) => {
      const hash = c.repeat(32);
      const [row] = await kiln.sql<{ id: string }[]>`
        insert into cached_paths (hash_part, store_path, nar_hash, nar_size, file_hash, file_size, listing)
        values (${hash}, ${`/nix/store/${hash}-${name}`}, ${`sha256:${name}`}, ${size}, ${c.repeat(52)}, ${size}, '{}') returning id`;
      await kiln.sql`insert into path_signatures (cache_id, hash_part, cached_path_id, signature, created_at) values (${cacheId}, ${hash}, ${row!.id}, 'test-1:x', ${uploaded})`;
      return { hash, storePath: `/nix/store/${hash}-${name}` };
    };
    const a = await synthetic(forever!.id, 'g', 'big-a', new Date('2001-01-01T00:00:00Z'));
    const b = await synthetic(vault.id, 'h', 'big-b', new Date('2002-01-01T00:00:00Z'));
    const c = await synthetic(forever!.id, 'i', 'big-c', new Date('2003-01-01T00:00:00Z'));
    const d = await synthetic(forever!.id, 'j', 'big-d', new Date('2004-01-01T00:00:00Z'));
    t.equal((await kiln.api('PUT', `/caches/forever/pins/${a.hash}`, { token: ada.token, body: {} })).status, 200);
    const holds = async (cacheId: string, hash: string) => (await kiln.sql`select 1 from path_signatures where cache_id = ${cacheId} and hash_part = ${hash}`).length === 1;

    // While the pass runs (after its first page is removed, before the storage phase), an
    // evaluation of acme/app records a build whose output is b.
    let recorded = false;
    const recordDuringPass = async (point: string) => {
      if (point !== 'gc.pass.pageRemoved' || recorded) return;
      recorded = true;
      const at = clock.now();
      const [e] = await kiln.sql<{ id: string }[]>`
        insert into evaluations (task_id, repository, wildcard, phase, created_at, updated_at) values (${task!.id}, 'file:///nonexistent', '*', 'building', ${at}, ${at}) returning id`;
      const [drv] = await kiln.sql<{ id: string }[]>`insert into derivations (drv_path, name, system, outputs)
        values (${`/nix/store/${'k'.repeat(32)}-big-b.drv`}, 'big-b', 'x86_64-linux', ${kiln.sql.json({ out: b.storePath })}) returning id`;
      const [built] = await kiln.sql<{ id: string }[]>`insert into derivation_builds (derivation_id, status) values (${drv!.id}, 'queued') returning id`;
      await kiln.sql`insert into builds (evaluation_id, derivation_build_id, entry_point, attr, created_at) values (${e!.id}, ${built!.id}, true, 'packages.b', ${at})`;
    };
    const limited = new GarbageCollector(
      { sql: kiln.db.web, config: { ...gcConfig, 'cache.maxStorageGb': 1 }, log: kiln.log, events: kiln.events.events, nars: kiln.nars, clock, crashPoints: recordDuringPass },
      { loop: false },
    );
    t.teardown(() => limited.stop());
    await kiln.api('POST', '/admin/gc', { token: ada.token, body: {} });
    t.same(await limited.tick(), ['pass']);
    t.ok(recorded, 'the evaluation was recorded in the middle of the pass');

    t.ok(await held('main', fetchedLately), 'fetched within the TTL: stays, however old its upload');
    t.notOk(await held('main', fetchedLongAgo), 'last fetched beyond the TTL: collected');
    t.ok(await holds(forever!.id, a.hash), 'the least recently used copy is pinned: it stays');
    t.ok(await holds(vault.id, b.hash), 'the next one is named by an evaluation recorded during the pass: it stays');
    t.notOk(await holds(forever!.id, c.hash), 'evicted for the instance limit');
    t.ok(await holds(forever!.id, d.hash), 'only what the excess needs: the newest stays');
    const sweptHere = (await outbox()).filter((e) => e.event === 'gc.swept' && e.content['reason'] === 'storage' && e.content['cache'] === 'forever');
    t.match(sweptHere, [{ content: { cache: 'forever', reason: 'storage', paths: 1, bytes: size } }]);
  });

  t.test("a task's keep_evaluations, below eval.maxKeep, decides what its evaluations keep alive", async (t) => {
    const [lean] = await kiln.sql<{ id: string }[]>`insert into tasks (project_id, name, keep_evaluations) values (${projectId}, 'lean', 1) returning id`;
    const older = await makeTestNar(t, { f: 'the older of two evaluations of a task keeping one\n' }, [], 'lean-older');
    const newer = await makeTestNar(t, { f: 'the newer of two evaluations of a task keeping one\n' }, [], 'lean-newer');
    for (const nar of [older, newer]) await upload('main', nar);
    await evaluation(older, 'completed', 3, 3, lean!.id);
    await evaluation(newer, 'completed', 2, 2, lean!.id);
    clock.step(12 * HOUR);
    const collector = new GarbageCollector({ sql: kiln.db.web, config: gcConfig, log: kiln.log, events: kiln.events.events, nars: kiln.nars, clock }, { loop: false });
    t.teardown(() => collector.stop());
    await kiln.api('POST', '/admin/gc', { token: ada.token, body: {} });
    t.same(await collector.tick(), ['pass']);
    t.ok(await held('main', newer), 'the newest evaluation of the task keeps its output');
    t.notOk(await held('main', older), "past the task's keep_evaluations (1), though within eval.maxKeep (2): collected");
  });

  t.test('gc.orphanDerivationHours 0: the pass that marks an orphan derivation deletes it', async (t) => {
    const [zero] = await kiln.sql<{ id: string }[]>`insert into tasks (project_id, name, keep_evaluations) values (${projectId}, 'zero', 1) returning id`;
    const gone = await makeTestNar(t, { f: 'built by an evaluation no longer retained\n' }, [], 'zero-older');
    const kept = await makeTestNar(t, { f: 'built by the retained evaluation\n' }, [], 'zero-newer');
    const older = await evaluation(gone, 'completed', 3, 3, zero!.id);
    const newer = await evaluation(kept, 'completed', 2, 2, zero!.id);
    const collector = new GarbageCollector(
      { sql: kiln.db.web, config: { ...gcConfig, 'gc.orphanDerivationHours': 0 }, log: kiln.log, events: kiln.events.events, nars: kiln.nars, clock }, { loop: false });
    t.teardown(() => collector.stop());
    const [before] = await kiln.sql<{ orphaned_since: Date | null }[]>`select orphaned_since from derivations where id = ${older.derivationId}`;
    t.equal(before?.orphaned_since, null, 'not marked before the pass');
    await kiln.api('POST', '/admin/gc', { token: ada.token, body: {} });
    t.same(await collector.tick(), ['pass']);
    t.equal((await kiln.sql`select 1 from derivations where id = ${older.derivationId}`).length, 0, 'marked and deleted by one pass');
    t.equal((await kiln.sql`select 1 from derivations where id = ${newer.derivationId}`).length, 1, "the retained evaluation's derivation stays");
  });
});
