// Two server processes on one database: a cache made public through one is served anonymously by
// the other at once. The observing server's access memo runs on a clock that never moves, so its
// TTL cannot be what let the change through: only cache.changed on the event bus (PostgreSQL
// LISTEN/NOTIFY, or Redis pub/sub with redis.url) can.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { eventually } from '../../support/eventually.js';
import { freePort, startTestKiln } from '../../support/kiln.js';
import { registerAndLogin, startServerProcess } from '../../support/serverProcess.js';

const REDIS_URL = process.env['KILN_TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379';

for (const transport of ['postgres', 'redis'] as const) {
  t.test(`a cache's public flag changed through one process is seen by the other without waiting for its TTL (${transport})`, async (t) => {
    const frozen = Date.now();
    const observer = await startTestKiln(t, transport === 'redis' ? { 'redis.url': REDIS_URL } : {}, { cacheAccessClock: { now: () => frozen } });
    t.equal(observer.events.bus.transport, transport);
    const baseDir = await mkdtemp(join(tmpdir(), 'kiln-changer-'));
    t.teardown(() => rm(baseDir, { recursive: true, force: true }));
    // The second process shares the first one's generated keys, as docs/auth.md shows.
    const keys = ['--secrets-crypt-file', join(observer.baseDir, 'secrets', 'crypt.key'), '--secrets-jwt-file', join(observer.baseDir, 'secrets', 'jwt.key')];
    const changer = await startServerProcess(observer.db.url, baseDir, await freePort(), keys, transport === 'redis' ? { SERVICE_REDIS_URL: REDIS_URL } : {});
    t.teardown(() => changer.child.kill('SIGKILL'));

    const { token } = await registerAndLogin(changer.url, 'ada');
    const api = (method: string, path: string, body: unknown) => fetch(`${changer.url}/api/v1${path}`, {
      method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body),
    });
    t.equal((await api('PUT', '/caches', { name: 'shared', public: false })).status, 200, 'the cache is made through the other process');

    const info = () => fetch(`${observer.url}/cache/shared/nix-cache-info`).then(async (r) => (await r.arrayBuffer(), r.status));
    t.equal(await info(), 401, 'private: an anonymous reader is challenged, and the observer remembers that');
    t.equal(await info(), 401, 'still remembered');

    t.equal((await api('PATCH', '/caches/shared', { public: true })).status, 200, 'made public through the other process');
    t.equal(await eventually(info, { until: (status) => status === 200, message: 'the observer serves the now public cache' }), 200);

    t.equal((await api('PATCH', '/caches/shared', { public: false })).status, 200, 'and private again');
    t.equal(await eventually(info, { until: (status) => status === 401, message: 'the observer challenges again' }), 401);
  });
}
