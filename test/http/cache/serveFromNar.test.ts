// serve/{hash}/{path} as a hostile tenant and a hostile client see it: tenant files never run on
// kiln's origin (sandbox, nosniff, active types as downloads, upstream logs too), and directory
// archives are streamed with backpressure, bounded in number, and not packed for HEAD.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { startTestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { nixGenerateKey, nixStoreAdd, requireNix, tempDir } from '../../support/nixStore.js';
import { localNar, uploadChunked } from '../../support/narUploads.js';
import { eventually } from '../../support/eventually.js';

requireNix();

const SANDBOX = "sandbox; default-src 'none'";
const ARCHIVED_BYTES = 32 * 1024 * 1024;

/** Tar bytes packed so far, across every archive of the server (ArchiveProgress). */
const progress = { packedBytes: 0, packed(bytes: number) { this.packedBytes += bytes; } };

/** Resolves once the packed count has not moved for `quietPolls` polls in a row. */
async function packingStalled(quietPolls = 10): Promise<number> {
  let last = -1;
  let quiet = 0;
  await eventually(() => {
    quiet = progress.packedBytes === last ? quiet + 1 : 0;
    last = progress.packedBytes;
    return quiet >= quietPolls;
  }, { interval: 100, message: 'the packing stalls' });
  return last;
}

/** A GET that reads its answer's head and then nothing more: the socket is paused. */
function stalledGet(url: string, path: string): Promise<{ socket: Socket; head: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(`GET ${path} HTTP/1.1\r\nHost: ${hostname}\r\n\r\n`));
    let received = '';
    socket.on('error', reject);
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
      const end = received.indexOf('\r\n\r\n');
      if (end < 0) return;
      socket.pause();
      socket.removeAllListeners('data');
      resolve({ socket, head: received.slice(0, end) });
    });
  });
}

t.test('serve/', async (t) => {
  const kiln = await startTestKiln(t, { 'cache.serveArchiveConcurrency': 1 }, { archiveProgress: progress });
  const ada = await signUp(kiln, 'ada');
  await createTestCache(kiln.sql, 'pub', { public: true, ownerId: ada.id });
  await createTestCache(kiln.sql, 'secret', { public: false, ownerId: ada.id });

  const site = tempDir('kiln-serve-site-');
  writeFileSync(join(site, 'index.html'), '<script>fetch("/api/v1/user").then(r => r.text()).then(alert)</script>');
  writeFileSync(join(site, 'pic.svg'), '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>');
  writeFileSync(join(site, 'app.js'), 'alert(document.cookie)');
  writeFileSync(join(site, 'feed.xml'), '<html xmlns="http://www.w3.org/1999/xhtml"><script>alert(1)</script></html>');
  writeFileSync(join(site, 'notes.txt'), 'plain\n');
  writeFileSync(join(site, 'shot.png'), Buffer.from('89504e470d0a1a0a', 'hex'));
  writeFileSync(join(site, 'noext'), '<html><script>alert(1)</script></html>');
  const sitePath = nixStoreAdd(site);
  const siteNar = localNar(sitePath);
  t.equal((await uploadChunked(kiln, ada.token, 'pub', siteNar)).status, 200);

  // Random bytes: neither the stored NAR nor the archive compresses, so it outgrows every socket buffer.
  const big = tempDir('kiln-serve-big-');
  mkdirSync(join(big, 'data'));
  writeFileSync(join(big, 'data', 'blob'), randomBytes(ARCHIVED_BYTES));
  const bigNar = localNar(nixStoreAdd(big));
  t.equal((await uploadChunked(kiln, ada.token, 'pub', bigNar, 4 * 1024 * 1024)).status, 200);

  const get = (path: string, init: RequestInit = {}) => fetch(`${kiln.url}${path}`, { redirect: 'manual', ...init });

  t.test('tenant files are sandboxed, never sniffed, and active types are downloads', async (t) => {
    for (const [file, type] of [['index.html', 'text/html'], ['pic.svg', 'image/svg+xml'], ['app.js', 'text/javascript'], ['feed.xml', 'application/xml'], ['noext', 'application/octet-stream']] as const) {
      const res = await get(`/cache/pub/serve/${siteNar.hash}/${file}`);
      t.equal(res.status, 200, file);
      t.match(res.headers.get('content-type'), type, `${file}: its type`);
      t.equal(res.headers.get('content-security-policy'), SANDBOX, `${file}: sandboxed`);
      t.equal(res.headers.get('x-content-type-options'), 'nosniff', `${file}: not sniffed`);
      t.equal(res.headers.get('content-disposition'), `attachment; filename="${file}"`, `${file}: a download`);
      await res.arrayBuffer();
    }
    for (const file of ['notes.txt', 'shot.png']) {
      const res = await get(`/cache/pub/serve/${siteNar.hash}/${file}`);
      t.equal(res.headers.get('content-security-policy'), SANDBOX, `${file}: sandboxed`);
      t.equal(res.headers.get('x-content-type-options'), 'nosniff');
      t.equal(res.headers.get('content-disposition'), null, `${file}: an inert type is shown inline`);
      await res.arrayBuffer();
    }
  });

  t.test('every serve/ answer carries the sandbox: errors, directories, HEAD, private caches', async (t) => {
    const answers = [
      ['a directory', await get(`/cache/pub/serve/${siteNar.hash}`)],
      ['HEAD of a file', await get(`/cache/pub/serve/${siteNar.hash}/index.html`, { method: 'HEAD' })],
      ['a missing file', await get(`/cache/pub/serve/${siteNar.hash}/missing.html`)],
      ['a missing path', await get(`/cache/pub/serve/${'0'.repeat(32)}/index.html`)],
      ['a private cache without credentials', await get(`/cache/secret/serve/${siteNar.hash}/index.html`)],
      ['a cache that does not exist', await get(`/cache/nope/serve/${siteNar.hash}/index.html`)],
    ] as const;
    for (const [what, res] of answers) {
      t.equal(res.headers.get('content-security-policy'), SANDBOX, `${what} (${res.status}): sandboxed`);
      t.equal(res.headers.get('x-content-type-options'), 'nosniff', `${what}: not sniffed`);
      await res.arrayBuffer();
    }
    t.equal(answers[0][1].headers.get('content-disposition'), `attachment; filename="${siteNar.hash}.tar.zst"`);
    t.equal(answers[4][1].status, 401);
  });

  t.test('a log from a tenant\'s upstream is sandboxed and, claimed as HTML, a download', async (t) => {
    const upstream = createServer((req, res) => {
      if (req.url === '/log/evil.drv') res.writeHead(200, { 'content-type': 'text/html' }).end('<script>alert(1)</script>');
      else if (req.url === '/log/plain.drv') res.writeHead(200, { 'content-type': 'text/plain' }).end('building\n');
      else res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    t.teardown(() => new Promise<void>((resolve) => upstream.close(() => resolve())));
    const url = `http://127.0.0.1:${(upstream.address() as { port: number }).port}`;
    t.equal((await kiln.api('PUT', '/caches', { token: ada.token, body: { name: 'mirror', public: true } })).status, 200);
    const added = await kiln.api('PUT', '/caches/mirror/upstreams', { token: ada.token, body: { url, public_key: nixGenerateKey('evil-1').public } });
    t.equal(added.status, 200, JSON.stringify(added.message));
    const evil = await get('/cache/mirror/log/evil.drv');
    t.equal(evil.status, 200);
    t.equal(evil.headers.get('content-security-policy'), SANDBOX);
    t.equal(evil.headers.get('x-content-type-options'), 'nosniff');
    t.equal(evil.headers.get('content-disposition'), 'attachment; filename="evil.drv"');
    await evil.arrayBuffer();
    const plain = await get('/cache/mirror/log/plain.drv');
    t.equal(plain.headers.get('content-disposition'), null);
    t.equal(plain.headers.get('content-security-policy'), SANDBOX);
    t.equal(await plain.text(), 'building\n');
    const missing = await get('/cache/mirror/log/missing.drv');
    t.equal(missing.status, 404);
    t.equal(missing.headers.get('content-security-policy'), SANDBOX);
  });

  t.test('directory archives: streamed with backpressure, bounded, not packed for HEAD', async (t) => {
    const path = `/cache/pub/serve/${bigNar.hash}`;
    progress.packedBytes = 0;
    const first = await stalledGet(kiln.url, path);
    t.teardown(() => first.socket.destroy());
    t.match(first.head, /^HTTP\/1\.1 200 /);
    t.match(first.head, /transfer-encoding: chunked/i, 'no length is known upfront');
    const packed = await packingStalled();
    t.ok(packed > 0, 'packing started');
    t.ok(packed < ARCHIVED_BYTES / 2, `a client that does not read holds packing back (${packed} of ${ARCHIVED_BYTES} bytes packed)`);

    const busy = await get(path);
    t.equal(busy.status, 503, 'the one archive place is taken');
    t.equal(busy.headers.get('retry-after'), '5');
    t.equal(busy.headers.get('content-security-policy'), SANDBOX);
    const busyBody = await busy.text();
    t.match(busyBody.startsWith('{') ? JSON.parse(busyBody) : busyBody, { error: true, code: 'archive_busy' });

    const head = await get(path, { method: 'HEAD' });
    t.equal(head.status, 200, 'HEAD needs no archive place');
    t.equal(head.headers.get('content-type'), 'application/zstd');
    t.equal(head.headers.get('content-disposition'), `attachment; filename="${bigNar.hash}.tar.zst"`);
    t.equal(head.headers.get('transfer-encoding'), 'chunked', 'the head a GET sends');
    t.equal(head.headers.get('content-length'), null, 'no made-up length');
    t.equal(progress.packedBytes, packed, 'HEAD packed nothing');

    first.socket.destroy();
    const again = await eventually(async () => {
      const answer = await get(path);
      if (answer.status !== 503) return answer;
      await answer.arrayBuffer();
      return undefined;
    }, { interval: 50, message: 'the archive place comes back' });
    t.equal(again.status, 200, 'the place comes back when the stalled client leaves');
    const out = mkdtempSync(join(tmpdir(), 'kiln-untar-'));
    try {
      execFileSync('tar', ['--zstd', '-x', '-C', out], { input: Buffer.from(await again.arrayBuffer()), maxBuffer: 1 << 20 });
      t.equal(statSync(join(out, 'data', 'blob')).size, ARCHIVED_BYTES, 'the whole archive arrives to a client that reads');
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});
