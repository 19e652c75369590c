import t, { type Test } from 'tap';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startTestKiln, type TestKiln } from '../../support/kiln.js';
import { signUp, type TestAccount } from '../../support/accounts.js';
import { buildFixturePaths, nixCopyToFileCache, nixGenerateKey, tempDir } from '../../support/nixStore.js';
import { freshStore, netrcFile, runNix } from '../../support/nixClient.js';
import { uploadStorePath } from '../../support/restUpload.js';
import { startStaticServer } from '../../support/staticServer.js';

interface UpstreamView {
  id: string;
  url: string;
  public_key: string;
  priority: number;
}

const hashOf = (path: string) => path.slice('/nix/store/'.length, '/nix/store/'.length + 32);

async function cacheKey(kiln: TestKiln, owner: TestAccount, name: string, body: Record<string, unknown> = {}): Promise<string> {
  const res = await kiln.api<{ public_key: string }>('PUT', '/caches', { token: owner.token, body: { name, ...body } });
  if (res.status !== 200) throw new Error(`create ${name}: ${JSON.stringify(res.message)}`);
  return res.message.public_key;
}

/** `nix copy --from` the cache into an empty store, then `nix store verify` there, trusting only `trusted`. */
async function substitute(t: Test, from: string, paths: string[], trusted: string, netrc?: string): Promise<void> {
  const store = freshStore();
  const copy = await runNix('nix', ['copy', '--from', from, '--to', store, '--option', 'trusted-public-keys', trusted, ...paths], netrc ? { netrc } : {});
  t.equal(copy.status, 0, `nix copy --from ${from}: ${copy.stderr.slice(-2000)}`);
  const verify = await runNix('nix', ['store', 'verify', '--store', store, '--option', 'trusted-public-keys', trusted, ...paths]);
  t.equal(verify.status, 0, `nix store verify: ${verify.stderr.slice(-2000)}`);
}

t.test('a kiln cache as the upstream of another', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  const eve = await signUp(kiln, 'eve');
  const upKey = await cacheKey(kiln, ada, 'up', { public: true });
  const downKey = await cacheKey(kiln, ada, 'down');
  const fx = buildFixturePaths();
  for (const path of [fx.file, fx.refs, fx.tree]) t.equal((await uploadStorePath(kiln.url, ada.token, 'up', path)).status, 200);

  t.test('managing the list: manageCache adds and removes, viewers read', async (t) => {
    const bad = await kiln.api('PUT', '/caches/down/upstreams', { token: ada.token, body: { url: `${kiln.url}/cache/up`, public_key: 'up-1:short' } });
    t.equal(bad.status, 400);
    t.match(bad.message, /^public_key: /);
    for (const [url, message] of [['ftp://x/y', /^url: /], ['http://user:pw@x/c', /^url: .*credentials/], ['http://x/c?a=b', /^url: /], [`${kiln.url}/cache/down`, /^url: .* itself/]] as const) {
      const res = await kiln.api('PUT', '/caches/down/upstreams', { token: ada.token, body: { url, public_key: upKey } });
      t.equal(res.status, 400, url);
      t.match(res.message, message);
    }
    const added = await kiln.api<UpstreamView[]>('PUT', '/caches/down/upstreams', { token: ada.token, body: { url: `${kiln.url}/cache/up/`, public_key: upKey } });
    t.equal(added.status, 200, JSON.stringify(added.message));
    t.match(added.message, [{ url: `${kiln.url}/cache/up`, public_key: upKey, priority: 50 }], 'stored without the trailing slash');
    const again = await kiln.api<UpstreamView[]>('PUT', '/caches/down/upstreams', { token: ada.token, body: { url: `${kiln.url}/cache/up`, public_key: upKey, priority: 10 } });
    t.equal(again.message.length, 1, 'the same URL updates, not adds');
    t.equal(again.message[0]!.priority, 10);
    t.equal((await kiln.api('GET', '/caches/down/upstreams', { token: eve.token })).status, 404);
    t.equal((await kiln.api('DELETE', '/caches/down/upstreams/00000000-0000-0000-0000-000000000000', { token: ada.token })).code, 'upstream_not_found');
    t.equal((await kiln.api('DELETE', '/caches/down/upstreams/nonsense', { token: ada.token })).code, 'upstream_not_found');
  });

  const netrc = netrcFile(ada.token);
  const basic = { authorization: `Basic ${Buffer.from(`x:${ada.token}`).toString('base64')}` };

  t.test('a miss is answered from the upstream: X-Cache MISS, both signatures, the NAR proxied', async (t) => {
    const res = await fetch(`${kiln.url}/cache/down/${hashOf(fx.refs)}.narinfo`, { headers: basic });
    t.equal(res.status, 200);
    t.equal(res.headers.get('x-cache'), 'MISS');
    const text = await res.text();
    const sigs = text.split('\n').filter((l) => l.startsWith('Sig: ')).map((l) => l.slice(5).split(':')[0]);
    t.same(sigs.sort(), ['127.0.0.1-down-1', '127.0.0.1-up-1']);
    const url = /^URL: (.*)$/m.exec(text)![1]!;
    t.match(url, new RegExp(`^upstream/[0-9a-f-]{36}/${hashOf(fx.refs)}/nar/[0-9a-z]{52}\\.nar\\.zst$`));
    const nar = await fetch(`${kiln.url}/cache/down/${url}`, { headers: basic });
    t.equal(nar.status, 200);
    const size = Number(/^FileSize: (\d+)$/m.exec(text)![1]);
    t.equal(Number(nar.headers.get('content-length')), size);
    t.equal((await nar.arrayBuffer()).byteLength, size);
    const part = await fetch(`${kiln.url}/cache/down/${url}`, { headers: { ...basic, range: 'bytes=4-9' } });
    t.equal(part.status, 206);
    t.equal(part.headers.get('content-range'), `bytes 4-9/${size}`);
    t.equal((await part.arrayBuffer()).byteLength, 6);
    t.equal((await fetch(`${kiln.url}/cache/down/${url}`, { headers: { ...basic, range: `bytes=${size}-` } })).status, 416);
    t.equal((await fetch(`${kiln.url}/cache/down/${url}`)).status, 401, 'the proxy is as private as the cache');
    t.equal((await fetch(`${kiln.url}/cache/down/upstream/00000000-0000-0000-0000-000000000000/${hashOf(fx.refs)}/nar/x.nar`, { headers: basic })).status, 404);
    const upstreamId = url.split('/')[1]!;
    const other = (path: string) => fetch(`${kiln.url}/cache/down/upstream/${upstreamId}/${path}`, { headers: basic }).then((r) => r.status);
    t.equal(await other(`${hashOf(fx.refs)}/nix-cache-info`), 404, 'only the file the verified narinfo names is proxied');
    t.equal(await other(`${hashOf(fx.file)}/${url.split('/').slice(3).join('/')}`), 404, 'not under another path\'s hash');
    t.equal(await other(`${'0'.repeat(32)}/nix-cache-info`), 404);
    t.equal((await fetch(`${kiln.url}/cache/down/${url.replace('/nar/', '/nar/../')}`, { headers: basic })).status, 404, 'no dot segments');
    t.equal((await fetch(`${kiln.url}/cache/down/${'0'.repeat(32)}.narinfo`, { headers: basic })).status, 404, 'a miss everywhere is a 404');
  });

  t.test('real Nix substitutes the closure through the downstream cache, trusting only its key', async (t) => {
    await substitute(t, `${kiln.url}/cache/down`, [fx.refs, fx.tree], downKey, netrc);
  });

  t.test('an upstream whose narinfos do not verify under the configured key is not believed', async (t) => {
    await kiln.api('PUT', '/caches', { token: ada.token, body: { name: 'gullible', public: true } });
    await kiln.api('PUT', '/caches/gullible/upstreams', { token: ada.token, body: { url: `${kiln.url}/cache/up`, public_key: downKey.replace('down', 'up') } });
    t.equal((await fetch(`${kiln.url}/cache/gullible/${hashOf(fx.file)}.narinfo`)).status, 404);
  });

  t.test('removing the upstream takes effect at once', async (t) => {
    const [row] = (await kiln.api<UpstreamView[]>('GET', '/caches/down/upstreams', { token: ada.token })).message;
    t.same((await kiln.api<UpstreamView[]>('DELETE', `/caches/down/upstreams/${row!.id}`, { token: ada.token })).message, []);
    t.equal((await fetch(`${kiln.url}/cache/down/${hashOf(fx.tree)}.narinfo`, { headers: basic })).status, 404);
  });
});

t.test('a `nix copy --to file://` cache served over HTTP as the upstream', async (t) => {
  const kiln = await startTestKiln(t, { 'cache.upstreamQueryConcurrency': 1 });
  const ada = await signUp(kiln, 'ada');
  const fx = buildFixturePaths();
  const dir = tempDir('kiln-upstream-');
  const key = nixGenerateKey('static-cache-1');
  const secretFile = join(tempDir('kiln-upstream-key-'), 'secret');
  writeFileSync(secretFile, key.secret);
  nixCopyToFileCache(join(dir, 'xz'), [fx.refs, fx.tree, fx.executable], { compression: 'xz', 'secret-key': secretFile });
  // A build log beside it, as `nix store copy-log` would put one.
  mkdirSync(join(dir, 'xz', 'log'), { recursive: true });
  writeFileSync(join(dir, 'xz', 'log', 'abc-example.drv'), 'building example\n');

  const plain = await startStaticServer(t, join(dir, 'xz'), { narinfoDelayMs: 20 });
  const chunked = await startStaticServer(t, join(dir, 'xz'), { chunked: true });
  const mirrorKey = await cacheKey(kiln, ada, 'mirror', { public: true });
  const streamedKey = await cacheKey(kiln, ada, 'streamed', { public: true });
  t.equal((await kiln.api('PUT', '/caches/mirror/upstreams', { token: ada.token, body: { url: plain.url, public_key: key.public } })).status, 200);
  t.equal((await kiln.api('PUT', '/caches/streamed/upstreams', { token: ada.token, body: { url: chunked.url, public_key: key.public } })).status, 200);

  t.test('Nix substitutes through kiln trusting only the kiln cache key', async (t) => {
    await substitute(t, `${kiln.url}/cache/mirror`, [fx.refs, fx.tree, fx.executable], mirrorKey);
  });

  t.test('or only the upstream\'s key: its own signature is passed on', async (t) => {
    await substitute(t, `${kiln.url}/cache/mirror`, [fx.refs], key.public);
  });

  t.test('an upstream without Content-Length is spooled first', async (t) => {
    await substitute(t, `${kiln.url}/cache/streamed`, [fx.tree], streamedKey);
    t.ok(chunked.requests.some((r) => r.startsWith('GET /nar/')));
  });

  t.test('narinfo queries to upstreams are bounded by cache.upstreamQueryConcurrency', async (t) => {
    const hashes = ['0', '1', '2', '3', '4', '5'].map((c) => c.repeat(32));
    const answers = await Promise.all(hashes.map((h) => fetch(`${kiln.url}/cache/mirror/${h}.narinfo`).then((r) => r.status)));
    t.same(answers, hashes.map(() => 404));
    t.equal(plain.maxConcurrentNarinfos, 1);
  });

  t.test('a miss is remembered briefly: asked again, the upstream is not asked again', async (t) => {
    const before = plain.requests.length;
    t.equal((await fetch(`${kiln.url}/cache/mirror/${'7'.repeat(32)}.narinfo`)).status, 404);
    t.equal((await fetch(`${kiln.url}/cache/mirror/${'7'.repeat(32)}.narinfo`)).status, 404);
    t.equal(plain.requests.length, before + 1);
  });

  t.test('build logs fall back to the upstream', async (t) => {
    const log = await fetch(`${kiln.url}/cache/mirror/log/abc-example.drv`);
    t.equal(log.status, 200);
    t.equal(await log.text(), 'building example\n');
    t.equal((await fetch(`${kiln.url}/cache/mirror/log/missing.drv`)).status, 404);
    t.equal((await fetch(`${kiln.url}/cache/mirror/debuginfo/0123abcd`)).status, 404);
  });
});
