// Crash safety with a real server process (`node bin/kiln.js serve`), killed with SIGKILL in the
// middle of a chunk and in the middle of finalize: after a restart the upload resumes from what the
// database says is staged, or is already complete, and no cached path points at a missing blob.
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { encodeNarStrings, encodeU64, hashNar, narPadding } from '../../../protocol/index.js';
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
  let server = await startServer(databaseUrl, baseDir, port);
  t.teardown(() => server.child.kill('SIGKILL'));

  const ada = await registerAndLogin(server.url, 'ada');
  const token = ada.token;
  await createTestCache(sql, 'main', { ownerId: ada.id, baseDir });

  const nar = narOfFile(randomBytes(24 << 20));
  const digest = await hashNar([nar]);
  const hash = '0c8mpcmk6vjh4wvcr8rdl91nr2ksdqk0';
  const info = { store_path: `/nix/store/${hash}-crash-test`, nar_hash: digest.narHash, nar_size: digest.narSize, references: [] };
  const auth = { authorization: `Bearer ${token}` };
  const chunk = (offset: number, body: Uint8Array | ReadableStream<Uint8Array>, extra: Record<string, string> = {}) =>
    fetch(`${server.url}/api/v1/caches/main/nars/${hash}/chunk?offset=${offset}`, { method: 'PUT', headers: { ...auth, ...extra }, body, duplex: 'half' } as RequestInit);
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
    // under way: the server has written some of the chunk past the staged half
    const uploads = join(baseDir, 'staging', 'uploads');
    await eventually(async () => Math.max(0, ...(await Promise.all((await readdir(uploads)).map(async (f) => (await stat(join(uploads, f))).size)))),
      { until: (size) => size > half, message: 'the server writes part of the second chunk' });
    await kill(server);
    t.ok((await cut) instanceof Error, 'the client saw the connection drop');
    server = await startServer(databaseUrl, baseDir, port);
    t.equal(await staged(), half, 'after the restart, only the complete chunk counts');
    const wrong = await chunk(half + (4 << 20), nar.subarray(half + (4 << 20)));
    t.equal(wrong.status, 409, 'the cut-off bytes are not a place to resume from');
    t.equal(wrong.headers.get('upload-offset'), String(half));
    t.equal((await chunk(half, nar.subarray(half))).status, 200, 'the chunk is sent again from the staged count');
  });

  t.test('finalize killed half-way: after a restart it completes, or it had completed', async (t) => {
    const finalizing = fetch(`${server.url}/api/v1/caches/main/nars/${hash}/finalize`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(info) }).catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 150));
    await kill(server);
    await finalizing;
    server = await startServer(databaseUrl, baseDir, port);
    const again = await fetch(`${server.url}/api/v1/caches/main/nars/${hash}/finalize`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(info) });
    t.equal(again.status, 200, await again.clone().text());
    const narinfo = await fetch(`${server.url}/cache/main/${hash}.narinfo`, { headers: { authorization: `Basic ${Buffer.from(`x:${token}`).toString('base64')}` } });
    t.equal(narinfo.status, 200);
  });

  t.test('no cached path points at a missing blob', async (t) => {
    const rows = await sql<{ file_hash: string }[]>`select file_hash from cached_paths`;
    t.ok(rows.length >= 1);
    for (const { file_hash } of rows) {
      t.ok(await stat(join(baseDir, 'blobs', 'nar', `${file_hash}.nar.zst`)).catch(() => null), `blob ${file_hash} exists`);
    }
  });
});
