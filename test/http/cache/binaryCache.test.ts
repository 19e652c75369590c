// The binary cache paths as any HTTP client sees them: cache info, narinfo, NAR files with HEAD and
// Range, listings, files and directories out of a NAR, private caches behind HTTP Basic, and rate limits.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, readlinkSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { parseNarListing, parseNarinfo, toNix32Hash } from '../../../protocol/index.js';
import { startTestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { addCacheMember, createTestCache } from '../../support/caches.js';
import { buildFixturePaths } from '../../support/nixStore.js';
import { createApiKey, localNar, uploadChunked } from '../../support/narUploads.js';

const basic = (password: string) => ({ authorization: `Basic ${Buffer.from(`anyone:${password}`).toString('base64')}` });

t.test('serving', async (t) => {
  // nar.smallBytes small enough that the tree fixture's NAR file is streamed from storage, not memory.
  const kiln = await startTestKiln(t, { 'nar.smallBytes': 1024 });
  const ada = await signUp(kiln, 'ada');
  const bob = await signUp(kiln, 'bob');
  const cat = await signUp(kiln, 'cat');
  await createTestCache(kiln.sql, 'pub', { public: true, ownerId: ada.id, priority: 30, localPriority: 10 });
  const secret = await createTestCache(kiln.sql, 'secret', { public: false, ownerId: ada.id });
  await addCacheMember(kiln.sql, secret.id, bob.id, 'View');
  const fixtures = buildFixturePaths();
  const tree = localNar(fixtures.tree);
  const file = localNar(fixtures.file);
  const uploaded = new Map<string, { file_hash: string; file_size: number }>();
  for (const nar of [tree, file]) {
    const res = await uploadChunked(kiln, ada.token, 'pub', nar);
    if (res.status !== 200) throw new Error(JSON.stringify(res.body));
    uploaded.set(nar.hash, res.body.message as { file_hash: string; file_size: number });
  }
  t.equal((await uploadChunked(kiln, ada.token, 'secret', file)).status, 200);
  const get = (path: string, init: RequestInit & { headers?: Record<string, string> } = {}) => fetch(`${kiln.url}${path}`, { redirect: 'manual', ...init });

  t.test('nix-cache-info and pkg-cache-info, with local_priority for local clients', async (t) => {
    for (const name of ['nix-cache-info', 'pkg-cache-info']) {
      const res = await get(`/cache/pub/${name}`);
      t.equal(res.status, 200);
      t.equal(res.headers.get('content-type'), 'text/x-nix-cache-info');
      t.equal(await res.text(), 'StoreDir: /nix/store\nWantMassQuery: 1\nPriority: 30\n');
    }
    const local = await get('/cache/pub/nix-cache-info', { headers: { 'x-forwarded-for': '10.1.2.3' } });
    t.match(await local.text(), /Priority: 10\n/, 'a client in http.localIps');
    t.equal((await get('/cache/nope/nix-cache-info')).status, 404);
  });

  t.test('narinfo: signed, HIT, HEAD; unknown hashes are 404', async (t) => {
    const res = await get(`/cache/pub/${tree.hash}.narinfo`);
    t.equal(res.status, 200);
    t.equal(res.headers.get('x-cache'), 'HIT');
    t.equal(res.headers.get('content-type'), 'text/x-nix-narinfo');
    const text = await res.text();
    const parsed = parseNarinfo(text);
    t.ok(parsed.ok);
    if (parsed.ok) {
      t.equal(parsed.value.storePath, fixtures.tree);
      t.equal(parsed.value.narHash, toNix32Hash(tree.info.narHash, 'sha256'));
      t.equal(parsed.value.sigs.length, 1);
    }
    const head = await get(`/cache/pub/${tree.hash}.narinfo`, { method: 'HEAD' });
    t.equal(head.status, 200);
    t.equal(head.headers.get('content-length'), String(Buffer.byteLength(text)));
    t.equal(await head.text(), '');
    const miss = await get('/cache/pub/00000000000000000000000000000000.narinfo');
    t.equal(miss.status, 404);
    t.equal(miss.headers.get('content-type'), 'application/json');
    t.same(await miss.json(), { error: true, message: 'cache "pub" has no path 00000000000000000000000000000000', code: 'not_found' });
    const again = await get('/cache/pub/00000000000000000000000000000000.narinfo', { method: 'HEAD' });
    t.same([again.status, again.headers.get('content-length')], [404, String(Buffer.byteLength(JSON.stringify({ error: true, message: 'cache "pub" has no path 00000000000000000000000000000000', code: 'not_found' })))]);
    t.equal((await get('/cache/pub/not-a-hash.narinfo')).status, 404);
    t.equal((await get('/cache/pub/whatever/else')).status, 404, 'unknown paths are 404');
  });

  t.test('NAR files: no Content-Encoding, Content-Length, Range, HEAD, from storage and from memory', async (t) => {
    for (const nar of [tree, file]) {
      const { file_hash, file_size } = uploaded.get(nar.hash)!;
      const url = `/cache/pub/nar/${file_hash}.nar.zst`;
      const whole = await get(url);
      t.equal(whole.status, 200);
      t.equal(whole.headers.get('content-encoding'), null);
      t.equal(whole.headers.get('content-length'), String(file_size));
      t.equal(whole.headers.get('accept-ranges'), 'bytes');
      const bytes = Buffer.from(await whole.arrayBuffer());
      t.equal(bytes.length, file_size);
      t.same(execFileSync('zstd', ['-d', '-c'], { input: bytes }), nar.nar, 'decompresses to the NAR');
      const part = await get(url, { headers: { range: 'bytes=10-19' } });
      t.equal(part.status, 206);
      t.equal(part.headers.get('content-range'), `bytes 10-19/${file_size}`);
      t.same(Buffer.from(await part.arrayBuffer()), bytes.subarray(10, 20));
      const tail = await get(url, { headers: { range: 'bytes=-5' } });
      t.same(Buffer.from(await tail.arrayBuffer()), bytes.subarray(file_size - 5));
      const outside = await get(url, { headers: { range: `bytes=${file_size}-` } });
      t.equal(outside.status, 416);
      t.equal(outside.headers.get('content-range'), `bytes */${file_size}`);
      const head = await get(url, { method: 'HEAD' });
      t.equal(head.status, 200);
      t.equal(head.headers.get('content-length'), String(file_size));
    }
    const { file_hash } = uploaded.get(tree.hash)!;
    t.equal((await get(`/cache/secret/nar/${file_hash}.nar.zst`, { headers: basic(ada.token) })).status, 404, 'a file of another cache is not served here');
    t.equal((await get('/cache/pub/nar/0000000000000000000000000000000000000000000000000000.nar.zst')).status, 404);
  });

  t.test('private caches: 401 with a Basic challenge, 404 for strangers, any user name', async (t) => {
    const path = `/cache/secret/${file.hash}.narinfo`;
    const anonymous = await get(path);
    t.equal(anonymous.status, 401);
    t.equal(anonymous.headers.get('www-authenticate'), 'Basic realm="kiln"');
    const wrong = await get(path, { headers: basic('not-a-token') });
    t.equal(wrong.status, 401);
    t.equal(wrong.headers.get('www-authenticate'), 'Basic realm="kiln"');
    t.equal((await get(path, { headers: basic(cat.token) })).status, 404, 'a signed-in stranger learns nothing');
    t.equal((await get(path, { headers: basic(bob.token) })).status, 200, 'a member with a session token');
    const key = await createApiKey(kiln, bob.token, 'nix', ['viewCache']);
    t.equal((await get(path, { headers: basic(key) })).status, 200, 'an API key');
    t.equal((await get('/cache/secret/nix-cache-info')).status, 401);
    t.equal((await get('/cache/nope/nix-cache-info', { headers: basic(bob.token) })).status, 404);
  });

  t.test('listings', async (t) => {
    for (const path of [`/cache/pub/ls/${tree.hash}`, `/cache/pub/${tree.hash}.ls`]) {
      const res = await get(path, { headers: { 'x-forwarded-for': '192.0.2.1' } });
      t.equal(res.status, 200);
      const listing = parseNarListing(await res.text());
      t.ok(listing.ok && listing.value.root.type === 'directory');
    }
    t.equal((await get('/cache/pub/ls/00000000000000000000000000000000')).status, 404);
  });

  t.test('serve: a file, a directory as tar.zst, a symlink as a redirect', async (t) => {
    const headers = { 'x-forwarded-for': '192.0.2.2' };
    const hello = await get(`/cache/pub/serve/${tree.hash}/bin/hello`, { headers });
    t.equal(hello.status, 200);
    t.equal(await hello.text(), readFileSync(join(fixtures.tree, 'bin/hello'), 'utf8'));
    t.equal(hello.headers.get('x-executable'), '1');
    const big = await get(`/cache/pub/serve/${tree.hash}/share/big.txt`, { headers });
    t.equal(big.headers.get('content-type'), 'text/plain; charset=utf-8');
    t.equal(await big.text(), readFileSync(join(fixtures.tree, 'share/big.txt'), 'utf8'));
    const link = await get(`/cache/pub/serve/${tree.hash}/share/link`, { headers });
    t.equal(link.status, 302);
    t.equal(link.headers.get('location'), `/cache/pub/serve/${tree.hash}/bin/hello`);
    const dir = await get(`/cache/pub/serve/${tree.hash}/share`, { headers });
    t.equal(dir.status, 200);
    t.equal(dir.headers.get('content-type'), 'application/zstd');
    const out = mkdtempSync(join(tmpdir(), 'kiln-untar-'));
    try {
      execFileSync('tar', ['--zstd', '-x', '-C', out], { input: Buffer.from(await dir.arrayBuffer()) });
      t.equal(readFileSync(join(out, 'big.txt'), 'utf8'), readFileSync(join(fixtures.tree, 'share/big.txt'), 'utf8'));
      t.equal(readlinkSync(join(out, 'link')), '../bin/hello');
      t.equal(readFileSync(join(out, 'doc/deep/er/f'), 'utf8'), 'a"b\\c\n');
      t.equal(readFileSync(join(out, '📦'), 'utf8'), 'emoji\n');
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
    const root = await get(`/cache/pub/serve/${tree.hash}`, { headers });
    t.equal(root.status, 200, 'the path itself, as a directory');
    const outRoot = mkdtempSync(join(tmpdir(), 'kiln-untar-'));
    try {
      execFileSync('tar', ['--zstd', '-x', '-C', outRoot], { input: Buffer.from(await root.arrayBuffer()) });
      t.ok(statSync(join(outRoot, 'bin/hello')).mode & 0o100, 'executables stay executable');
    } finally {
      rmSync(outRoot, { recursive: true, force: true });
    }
    t.equal((await get(`/cache/pub/serve/${tree.hash}/no/such/file`, { headers })).status, 404);
    t.equal((await get(`/cache/pub/serve/${tree.hash}/../etc/passwd`, { headers })).status, 404);
  });

  t.test('log and debuginfo: 404 until builds provide them', async (t) => {
    t.equal((await get('/cache/pub/log/00000000000000000000000000000000-x.drv')).status, 404);
    t.equal((await get('/cache/pub/debuginfo/0123456789abcdef')).status, 404);
  });

  t.test('ls and serve share a bucket per client: burst 180, then 429 with Retry-After', async (t) => {
    // All at once, so the outcome does not depend on how fast the machine is (one token per 333 ms).
    const headers = { 'x-forwarded-for': '198.18.0.1' };
    const answers = await Promise.all(
      Array.from({ length: 300 }, (_, i) => get(i % 2 ? `/cache/pub/ls/${tree.hash}` : `/cache/pub/serve/${tree.hash}/bin/hello`, { headers })),
    );
    const ok = answers.filter((a) => a.status === 200).length;
    const limited = answers.filter((a) => a.status === 429);
    t.ok(ok >= 180, `the burst of 180 went through (${ok})`);
    t.ok(limited.length > 0 && ok + limited.length === 300, `the rest were refused (${limited.length})`);
    t.ok(Number(limited[0]?.headers.get('retry-after')) >= 1, 'with Retry-After');
    t.equal((await get(`/cache/pub/ls/${tree.hash}`, { headers: { 'x-forwarded-for': '198.18.0.2' } })).status, 200, 'another client has its own bucket');
  });

  t.test('uploads at the cache paths need writeStore', async (t) => {
    const body = 'StorePath: x\n';
    const anonymous = await get(`/cache/pub/${file.hash}.narinfo`, { method: 'PUT', body });
    t.equal(anonymous.status, 401, 'even on a public cache');
    t.equal(anonymous.headers.get('www-authenticate'), 'Basic realm="kiln"');
    const viewer = await get(`/cache/secret/${file.hash}.narinfo`, { method: 'PUT', body, headers: basic(bob.token) });
    t.equal(viewer.status, 403);
    const stranger = await get(`/cache/secret/${file.hash}.narinfo`, { method: 'PUT', body, headers: basic(cat.token) });
    t.equal(stranger.status, 404);
  });
});
