// Upstream caches that need credentials (docs/caches.md, "Upstream caches"): HTTP Basic (a private
// kiln cache as the upstream) or a bearer token, stored sealed, never shown by the API, sent with
// narinfo, NAR, log and debuginfo requests.
import t from 'tap';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startTestKiln, type TestKiln } from '../../support/kiln.js';
import { signUp, type TestAccount } from '../../support/accounts.js';
import { buildFixturePaths } from '../../support/nixStore.js';
import { freshStore, runNix } from '../../support/nixClient.js';
import { uploadStorePath } from '../../support/restUpload.js';

const hashOf = (path: string) => path.slice('/nix/store/'.length, '/nix/store/'.length + 32);

async function cacheKey(kiln: TestKiln, owner: TestAccount, name: string, body: Record<string, unknown> = {}): Promise<string> {
  const res = await kiln.api<{ public_key: string }>('PUT', '/caches', { token: owner.token, body: { name, ...body } });
  if (res.status !== 200) throw new Error(`create ${name}: ${JSON.stringify(res.message)}`);
  return res.message.public_key;
}

t.test('a private kiln cache as the upstream, with HTTP Basic credentials', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  const upKey = await cacheKey(kiln, ada, 'up');
  const downKey = await cacheKey(kiln, ada, 'down', { public: true });
  const fx = buildFixturePaths();
  for (const path of [fx.file, fx.refs]) t.equal((await uploadStorePath(kiln.url, ada.token, 'up', path)).status, 200);
  const narinfo = () => fetch(`${kiln.url}/cache/down/${hashOf(fx.refs)}.narinfo`);

  const without = await kiln.api('PUT', '/caches/down/upstreams', { token: ada.token, body: { url: `${kiln.url}/cache/up`, public_key: upKey } });
  t.equal(without.status, 200);
  t.equal((await narinfo()).status, 404, 'without credentials the private upstream answers 401: a miss');

  const bad = await kiln.api('PUT', '/caches/down/upstreams', {
    token: ada.token, body: { url: `${kiln.url}/cache/up`, public_key: upKey, credentials: { user: 'a:b', password: 'x' } },
  });
  t.equal(bad.status, 400);
  t.match(bad.message, /^credentials/);

  const added = await kiln.api<{ auth: string | null }[]>('PUT', '/caches/down/upstreams', {
    token: ada.token, body: { url: `${kiln.url}/cache/up`, public_key: upKey, credentials: { user: 'kiln', password: ada.token } },
  });
  t.equal(added.status, 200, JSON.stringify(added.message));
  t.match(added.message, [{ url: `${kiln.url}/cache/up`, auth: 'basic' }]);
  const listed = await kiln.api('GET', '/caches/down/upstreams', { token: ada.token });
  t.notOk(JSON.stringify(listed.message).includes(ada.token), 'the password is never shown');
  const [row] = await kiln.sql<{ credentials: Buffer }[]>`select credentials from cache_upstreams`;
  t.notOk(row!.credentials.toString('latin1').includes(ada.token), 'stored sealed');

  t.test('narinfo and NAR come through the credentials', async (t) => {
    const res = await narinfo();
    t.equal(res.status, 200);
    t.equal(res.headers.get('x-cache'), 'MISS');
    const url = /^URL: (.*)$/m.exec(await res.text())![1]!;
    const nar = await fetch(`${kiln.url}/cache/down/${url}`);
    t.equal(nar.status, 200);
    t.ok((await nar.arrayBuffer()).byteLength > 0);
  });

  t.test('real Nix substitutes through the public downstream cache', async (t) => {
    const store = freshStore();
    const copy = await runNix('nix', ['copy', '--from', `${kiln.url}/cache/down`, '--to', store, '--option', 'trusted-public-keys', downKey, fx.refs]);
    t.equal(copy.status, 0, copy.stderr.slice(-2000));
  });

  t.test('changing the priority keeps the credentials; null removes them', async (t) => {
    const kept = await kiln.api<{ auth: string | null; priority: number }[]>('PUT', '/caches/down/upstreams', {
      token: ada.token, body: { url: `${kiln.url}/cache/up`, public_key: upKey, priority: 7 },
    });
    t.match(kept.message, [{ priority: 7, auth: 'basic' }]);
    const removed = await kiln.api<{ auth: string | null }[]>('PUT', '/caches/down/upstreams', {
      token: ada.token, body: { url: `${kiln.url}/cache/up`, public_key: upKey, credentials: null },
    });
    t.match(removed.message, [{ auth: null }]);
    t.equal((await fetch(`${kiln.url}/cache/down/${hashOf(fx.file)}.narinfo`)).status, 404);
  });
});

t.test('a bearer token is sent to every kind of upstream request', async (t) => {
  const seen: { url: string; headers: IncomingHttpHeaders }[] = [];
  const server = createServer((req, res) => {
    seen.push({ url: req.url ?? '', headers: req.headers });
    if (req.headers.authorization !== 'Bearer s3cret-token') {
      res.writeHead(401).end();
      return;
    }
    if (req.url === '/log/abc-example.drv') res.writeHead(200, { 'content-type': 'text/plain' }).end('building example\n');
    else if (req.url === '/debuginfo/0123abcd') res.writeHead(200, { 'content-type': 'application/json' }).end('{"archive":"x"}');
    else res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const upstream = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  await cacheKey(kiln, ada, 'mirror', { public: true });
  const other = await cacheKey(kiln, ada, 'other');
  const put = await kiln.api<{ auth: string | null }[]>('PUT', '/caches/mirror/upstreams', {
    token: ada.token, body: { url: upstream, public_key: other, credentials: { token: 's3cret-token' } },
  });
  t.match(put.message, [{ auth: 'bearer' }]);

  const log = await fetch(`${kiln.url}/cache/mirror/log/abc-example.drv`);
  t.equal(log.status, 200);
  t.equal(await log.text(), 'building example\n');
  t.equal((await fetch(`${kiln.url}/cache/mirror/debuginfo/0123abcd`)).status, 200);
  t.equal((await fetch(`${kiln.url}/cache/mirror/${'1'.repeat(32)}.narinfo`)).status, 404);
  t.ok(seen.some((r) => r.url === `/${'1'.repeat(32)}.narinfo`), 'the narinfo was asked for');
  t.ok(seen.every((r) => r.headers.authorization === 'Bearer s3cret-token'), 'every request carried the token');
});
