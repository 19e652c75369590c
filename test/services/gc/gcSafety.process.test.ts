// Garbage collection safety with real Nix and a real server process (issue 20, "Safety"; docs/gc.md):
// after a pass with a TTL of 0 everything of the retained evaluation's closure and of a pinned
// closure still substitutes with `nix copy --from` (signatures required) while collected paths
// answer 404 on narinfo and NAR; kill -9 in the middle of a pass (a page of copies committed, their
// blobs not yet deleted) and of a deep round (after its first unit): after a restart the next runs
// finish the job and nothing is dangling (every row's blob exists, no blob without a row, no
// cached path no cache holds); `nix copy --to` running while passes run is never half-deleted.
// The process holds at named points (storage/nars/crashPoints.ts) instead of a guessed delay.
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { createTestCache } from '../../support/caches.js';
import { testDatabase } from '../../support/db.js';
import { eventually } from '../../support/eventually.js';
import { freePort } from '../../support/kiln.js';
import { insertProject } from '../../support/modelRows.js';
import { freshStore, netrcFile, nixOk, runNix } from '../../support/nixClient.js';
import { buildFixturePaths } from '../../support/nixStore.js';
import { killServerProcess as kill, registerAndLogin, startServerProcess, type ServerProcess } from '../../support/serverProcess.js';

const hashOf = (path: string) => path.slice('/nix/store/'.length, '/nix/store/'.length + 32);

t.test('collection with real Nix, kill -9 and concurrent uploads', async (t) => {
  const { url: databaseUrl, sql } = await testDatabase(t);
  const baseDir = await mkdtemp(join(tmpdir(), 'kiln-gc-safety-'));
  t.teardown(() => rm(baseDir, { recursive: true, force: true }));
  const port = await freePort();
  // TTL and grace 0: whatever nothing keeps is collectable at once. Passes and rounds run only on request.
  const env = {
    SERVICE_GC_NAR_TTL_HOURS: '0', SERVICE_GC_NAR_UPLOAD_GRACE_HOURS: '0', SERVICE_GC_INTERVAL_SECS: '86400', SERVICE_GC_DEEP_INTERVAL_SECS: '0',
    SERVICE_DATABASE_MIN_CONNECTIONS: '0', SERVICE_DATABASE_MAX_CONNECTIONS: '5', SERVICE_DATABASE_CACHE_MIN_CONNECTIONS: '0',
    SERVICE_DATABASE_CACHE_MAX_CONNECTIONS: '4', SERVICE_DATABASE_WEB_MIN_CONNECTIONS: '0', SERVICE_DATABASE_WEB_MAX_CONNECTIONS: '4',
  };
  const start = (hold?: string) => startServerProcess(databaseUrl, baseDir, port, [], hold === undefined ? env : { ...env, KILN_TEST_HOLD_AT: hold });
  let server: ServerProcess = await start();
  t.teardown(() => server.child.kill('SIGKILL'));

  const ada = await registerAndLogin(server.url, 'ada');
  const cache = await createTestCache(sql, 'main', { ownerId: ada.id, baseDir, public: true });
  const netrc = netrcFile(ada.token);
  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${server.url}/api/v1${path}`, {
      method, headers: { authorization: `Bearer ${ada.token}`, 'content-type': 'application/json', connection: 'close' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, message: ((await res.json()) as { message: Record<string, unknown> }).message };
  };
  /** Requests a pass or deep round now; its id. */
  const request = async (deep: boolean) => {
    const res = await api('POST', '/admin/gc', { deep });
    if (res.status !== 202) throw new Error(`POST /admin/gc: ${res.status} ${JSON.stringify(res.message)}`);
    return res.message['id'] as number;
  };
  /** Waits (polling; the collector looks every 5 s) until the run has ended; its state. */
  const ended = (id: number) => eventually(async () => (await api('GET', `/admin/gc/${id}`)).message['state'] as string, {
    until: (state) => state === 'finished' || state === 'failed', timeout: 120_000, interval: 250, message: `gc run ${id} ends`,
  });
  const run = async (deep: boolean) => ended(await request(deep));

  const fx = buildFixturePaths();
  // The retained evaluation's entry point is refs (which refers to file); tree is pinned; the rest is collectable.
  const live = [fx.refs, fx.file];
  const pinned = [fx.tree];
  const loose = [fx.executable, fx.empty, fx.symlink];
  await nixOk('nix', ['copy', '--to', `${server.url}/cache/main`, ...live, ...pinned, ...loose], { netrc });

  const projectId = await insertProject(sql, 'acme', 'app');
  await sql`insert into subscriptions (project_id, cache_id, mode) values (${projectId}, ${cache.id}, 0)`;
  const [task] = await sql<{ id: string }[]>`insert into tasks (project_id, name) values (${projectId}, 'default') returning id`;
  const [evaluation] = await sql<{ id: string }[]>`
    insert into evaluations (task_id, repository, wildcard, phase) values (${task!.id}, 'file:///nonexistent', '*', 'completed') returning id`;
  const [drv] = await sql<{ id: string }[]>`insert into derivations (drv_path, name, system, outputs)
    values (${`/nix/store/${'1'.repeat(32)}-kiln-fixture-refs.drv`}, 'kiln-fixture-refs', 'x86_64-linux', ${sql.json({ out: fx.refs })}) returning id`;
  const [built] = await sql<{ id: string }[]>`insert into derivation_builds (derivation_id, status) values (${drv!.id}, 'completed') returning id`;
  await sql`insert into builds (evaluation_id, derivation_build_id, entry_point, attr) values (${evaluation!.id}, ${built!.id}, true, 'packages.refs')`;
  t.equal((await api('PUT', `/caches/main/pins/${hashOf(fx.tree)}`, {})).status, 200, 'tree pinned');

  const narinfoOf = async (path: string) => {
    const res = await fetch(`${server.url}/cache/main/${hashOf(path)}.narinfo`, { headers: { connection: 'close' } });
    return { status: res.status, text: await res.text() };
  };
  const narUrls = new Map<string, string>();
  for (const path of loose) narUrls.set(path, /^URL: (.*)$/m.exec((await narinfoOf(path)).text)![1]!);
  const substitutes = async (paths: string[]) => {
    const copy = await runNix('nix', ['copy', '--from', `${server.url}/cache/main`, '--to', freshStore(), '--option', 'trusted-public-keys', cache.publicKey, ...paths]);
    return copy.status === 0 ? 'ok' : copy.stderr;
  };
  const blobFiles = async () => (await readdir(join(baseDir, 'blobs', 'nar'))).filter((f) => f.endsWith('.nar.zst')).map((f) => f.slice(0, -'.nar.zst'.length)).sort();
  const rowFiles = async () => (await sql<{ file_hash: string }[]>`select distinct file_hash from cached_paths order by file_hash`).map((r) => r.file_hash).sort();
  /** Every row's blob exists, no blob without a row, no cached path that no cache holds. */
  const nothingDangling = async (t: Test) => {
    t.same(await blobFiles(), await rowFiles(), "the blob files are exactly the rows' files");
    const [unheld] = await sql<{ n: number }[]>`select count(*)::int as n from cached_paths p where not exists (select 1 from path_signatures s where s.cached_path_id = p.id)`;
    t.equal(unheld!.n, 0, 'no cached path without a cache holding it');
  };
  const held = async (path: string) => (await sql`select 1 from path_signatures where cache_id = ${cache.id} and hash_part = ${hashOf(path)}`).length === 1;

  t.test('kill -9 during a pass (a page removed, its blobs not yet deleted); the next runs finish the job', async (t) => {
    await kill(server);
    server = await start('gc.pass.pageRemoved');
    const id = await request(false);
    await server.printed('kiln: holding at gc.pass.pageRemoved');
    await kill(server);
    for (const path of loose) t.notOk(await held(path), `${path}: its copy was removed before the crash`);
    t.ok((await blobFiles()).length > (await rowFiles()).length, 'the removed copies left their blobs behind');

    server = await start();
    t.equal(await ended(id), 'failed', 'the interrupted run is marked failed by the next lock holder');
    t.equal(await run(false), 'finished', 'the next pass runs');
    t.equal(await run(true), 'finished', 'a deep round removes the blobs the crash left');
    await nothingDangling(t);
    t.equal(await substitutes([...live, ...pinned]), 'ok', 'the live closure and the pinned closure substitute with signatures required');
    for (const path of loose) {
      t.equal((await narinfoOf(path)).status, 404, `${path}: narinfo 404`);
      const nar = await fetch(`${server.url}/cache/main/${narUrls.get(path)!}`, { headers: { connection: 'close' } });
      t.equal(nar.status, 404, `${path}: NAR 404`);
      await nar.arrayBuffer();
    }
  });

  t.test('kill -9 during a deep round; the next round finishes the job', async (t) => {
    // A stray blob no row points to, and a row whose blob is gone.
    // A file hash as the store names blobs (52 nix32 characters); other names are not the sweep's.
    const stray = [...randomBytes(52)].map((b) => '0123456789abcdfghijklmnpqrsvwxyz'[b % 32]).join('');
    await writeFile(join(baseDir, 'blobs', 'nar', `${stray}.nar.zst`), randomBytes(100));
    await nixOk('nix', ['copy', '--to', `${server.url}/cache/main`, fx.empty], { netrc });
    const [lost] = await sql<{ file_hash: string }[]>`select file_hash from cached_paths where hash_part = ${hashOf(fx.empty)}`;
    await unlink(join(baseDir, 'blobs', 'nar', `${lost!.file_hash}.nar.zst`));
    await kill(server);
    server = await start('gc.deep.unitChecked');
    const id = await request(true);
    await server.printed('kiln: holding at gc.deep.unitChecked');
    await kill(server);
    t.notOk(await held(fx.empty), 'the row without its blob went in the first unit');
    t.ok((await blobFiles()).includes(stray), 'the stray blob was still there at the crash');

    server = await start();
    t.equal(await ended(id), 'failed');
    t.equal(await run(true), 'finished');
    t.notOk((await blobFiles()).includes(stray), 'the next round removed the stray blob');
    await nothingDangling(t);
    t.equal(await substitutes([...live, ...pinned]), 'ok');
  });

  t.test('nix copy --to while passes run: nothing half-deleted', async (t) => {
    let uploading = true;
    const uploads = (async () => {
      try {
        for (let round = 0; round < 4; round++) {
          const copy = await runNix('nix', ['copy', '--to', `${server.url}/cache/main`, ...loose, ...live], { netrc });
          t.equal(copy.status, 0, `upload round ${round}: ${copy.stderr.slice(-500)}`);
        }
      } finally {
        uploading = false;
      }
    })();
    let passes = 0;
    while (uploading) {
      t.equal(await run(false), 'finished');
      passes++;
    }
    await uploads;
    t.ok(passes >= 1, `${passes} passes ran during the uploads`);
    // Whatever the cache holds now is whole: its narinfo answers and its NAR substitutes.
    const present = [...loose, ...live, ...pinned];
    const whole = [];
    for (const path of present) if (await held(path)) whole.push(path);
    for (const path of whole) t.equal((await narinfoOf(path)).status, 200, `${path}: held and served`);
    t.equal(await substitutes(whole), 'ok', 'every held path substitutes');
    t.equal(await run(true), 'finished');
    await nothingDangling(t);
    t.equal(await substitutes([...live, ...pinned]), 'ok', 'the live and pinned closures survived every pass');
  });
});
