// Crash safety with a real server process (`node bin/kiln.js serve`), killed with SIGKILL in the
// middle of a chunk (once some of its bytes are on disk) and at each named step of finalize (the
// process holds there: storage/nars/crashPoints.ts): after a restart the upload resumes from what
// the database says is staged, a finalize sent again completes it, and no cached path points at a
// missing blob.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { encodeNarStrings, encodeU64, hashNar, narPadding } from '../../../protocol/index.js';
import { stagingArea, type CrashPoint } from '../../../storage/index.js';
import { testDatabase } from '../../support/db.js';
import { freePort } from '../../support/kiln.js';
import { createTestCache } from '../../support/caches.js';
import { killServerProcess as kill, registerAndLogin, startServerProcess as startServer } from '../../support/serverProcess.js';
import { eventually } from '../../support/eventually.js';

/** A NAR of one regular file holding `contents`, written by hand (no Nix needed). */
function narOfFile(contents: Buffer): Buffer {
  return Buffer.concat([
    encodeNarStrings('nix-archive-1', '(', 'type', 'regular', 'contents'),
    encodeU64(contents.length),
    contents,
    Buffer.alloc(narPadding(contents.length)),
    encodeNarStrings(')'),
  ]);
}

t.test('kill -9 during a chunk and during finalize', async (t) => {
  const { url: databaseUrl, sql } = await testDatabase(t);
  const baseDir = await mkdtemp(join(tmpdir(), 'kiln-crash-'));
  t.teardown(() => rm(baseDir, { recursive: true, force: true }));
  const port = await freePort();
  // Small pools, as startTestKiln's: this file starts eight servers on a PostgreSQL other test files share.
  const pools = {
    SERVICE_DATABASE_MIN_CONNECTIONS: '0', SERVICE_DATABASE_MAX_CONNECTIONS: '5', SERVICE_DATABASE_CACHE_MIN_CONNECTIONS: '0',
    SERVICE_DATABASE_CACHE_MAX_CONNECTIONS: '4', SERVICE_DATABASE_WEB_MIN_CONNECTIONS: '0', SERVICE_DATABASE_WEB_MAX_CONNECTIONS: '4',
  };
  let server = await startServer(databaseUrl, baseDir, port, [], pools);
  t.teardown(() => server.child.kill('SIGKILL'));

  const ada = await registerAndLogin(server.url, 'ada');
  const token = ada.token;
  const cache = await createTestCache(sql, 'main', { ownerId: ada.id, baseDir });

  const nar = narOfFile(randomBytes(24 << 20));
  const digest = await hashNar([nar]);
  const hash = '0c8mpcmk6vjh4wvcr8rdl91nr2ksdqk0';
  const info = { store_path: `/nix/store/${hash}-crash-test`, nar_hash: digest.narHash, nar_size: digest.narSize, references: [] };
  // A connection per request: a kept-alive socket of a killed process would fail the next request sent on it.
  const auth = { authorization: `Bearer ${token}`, connection: 'close' };
  const chunk = (offset: number, body: Uint8Array | ReadableStream<Uint8Array>, extra: Record<string, string> = {}, path = hash) =>
    fetch(`${server.url}/api/v1/caches/main/nars/${path}/chunk?offset=${offset}`, { method: 'PUT', headers: { ...auth, ...extra }, body, duplex: 'half' } as RequestInit);
  const finalize = (path: string, narinfo: typeof info) =>
    fetch(`${server.url}/api/v1/caches/main/nars/${path}/finalize`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(narinfo) });
  /** Bounded: fails with `what` when it takes longer than a minute (a bound, not a timing check). */
  const within = <T>(promise: Promise<T>, what: string): Promise<T> => {
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} did not happen within 60 s`)), 60_000)));
    return Promise.race([promise, bound]).finally(() => clearTimeout(timer));
  };
  const staged = async () => ((await (await fetch(`${server.url}/api/v1/caches/main/nars/${hash}/upload`, { headers: auth })).json()) as { message: { bytes_staged: number } }).message.bytes_staged;
  const half = 12 << 20;

  t.test('a chunk cut off by the crash does not count', async (t) => {
    t.equal((await chunk(0, nar.subarray(0, half))).status, 200);
    // The second chunk starts streaming, then the server dies under it.
    let sent!: () => void;
    const started = new Promise<void>((r) => (sent = r));
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        controller.enqueue(nar.subarray(half, half + (4 << 20)));
        sent();
        await new Promise(() => undefined); // never finishes
      },
    });
    const cut = chunk(half, body, { 'content-length': String(nar.length - half) }).catch((e: unknown) => e);
    await started;
    // Killed once bytes of this chunk are in the staged file: the restart must not count them.
    const file = stagingArea(baseDir).uploadFile(cache.id, hash);
    await eventually(async () => (await stat(file).catch(() => null))?.size ?? 0, { until: (size) => size > half, timeout: 60_000, message: `a byte of the second chunk reaches ${file}` });
    await kill(server);
    t.ok((await cut) instanceof Error, 'the client saw the connection drop');
    server = await startServer(databaseUrl, baseDir, port, [], pools);
    t.equal(await staged(), half, 'after the restart, only the complete chunk counts');
    const wrong = await chunk(half + (4 << 20), nar.subarray(half + (4 << 20)));
    t.equal(wrong.status, 409, 'the cut-off bytes are not a place to resume from');
    t.equal(wrong.headers.get('upload-offset'), String(half));
    t.equal((await chunk(half, nar.subarray(half))).status, 200, 'the chunk is sent again from the staged count');
  });

  t.test('the upload finalizes after the restart', async (t) => {
    const done = await finalize(hash, info);
    t.equal(done.status, 200, await done.clone().text());
  });

  // Each point in turn: another small NAR, a server that holds its finalize there, kill -9, a plain restart.
  const points: CrashPoint[] = ['finalize.checked', 'finalize.ingested', 'finalize.stagedFileRemoved'];
  for (const [i, point] of points.entries()) {
    t.test(`finalize killed at ${point}: sent again after a restart, it completes`, async (t) => {
      const path = `${'123'[i]}c8mpcmk6vjh4wvcr8rdl91nr2ksdqk0`;
      const small = narOfFile(randomBytes(1 << 20));
      const smallDigest = await hashNar([small]);
      const smallInfo = { store_path: `/nix/store/${path}-crash-${i}`, nar_hash: smallDigest.narHash, nar_size: smallDigest.narSize, references: [] };
      await kill(server);
      server = await startServer(databaseUrl, baseDir, port, [], { ...pools, KILN_TEST_HOLD_AT: point });
      const first = await chunk(0, small, {}, path);
      t.equal(first.status, 200, await first.clone().text());
      const cut = finalize(path, smallInfo).catch((e: unknown) => e);
      await within(server.printed(`kiln: holding at ${point}`), `the hold at ${point}`);
      await kill(server);
      t.ok((await cut) instanceof Error, 'the client saw the connection drop');
      server = await startServer(databaseUrl, baseDir, port, [], pools);
      const again = await finalize(path, smallInfo);
      t.equal(again.status, 200, await again.clone().text());
      const narinfo = await fetch(`${server.url}/cache/main/${path}.narinfo`, { headers: { authorization: `Basic ${Buffer.from(`x:${token}`).toString('base64')}`, connection: 'close' } });
      t.equal(narinfo.status, 200);
      t.match(await narinfo.text(), `NarHash: ${smallDigest.narHash}`);
      t.same(await sql`select upload_key from staged_uploads where upload_key = ${path}`, [], 'the staged upload is gone');
    });
  }

  t.test('no cached path points at a missing blob', async (t) => {
    const rows = await sql<{ file_hash: string }[]>`select file_hash from cached_paths`;
    t.equal(rows.length, 1 + points.length);
    for (const { file_hash } of rows) {
      t.ok(await stat(join(baseDir, 'blobs', 'nar', `${file_hash}.nar.zst`)).catch(() => null), `blob ${file_hash} exists`);
    }
  });
});
