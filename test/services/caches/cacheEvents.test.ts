// cache.* events from the cache services (docs/caches.md, "Events"): the durable ones reach a
// cache's webhook (a real HTTP receiver) and the instance's; every one, live-only traffic events
// included, is on the firehose.
import t from 'tap';
import { signUp } from '../../support/accounts.js';
import { eventually, openLive, startEventKiln, startReceiver } from '../../support/events.js';
import { makeTestNar } from '../../support/narStorage.js';
import { uploadSingle } from '../../support/narUploads.js';

interface Delivered {
  event: string;
  content: Record<string, unknown>;
}

t.test('cache events', async (t) => {
  const kiln = await startEventKiln(t);
  const cacheHook = await startReceiver(t);
  const adminHook = await startReceiver(t);
  const ada = await signUp(kiln, 'ada'); // the first account: a superuser, who may read the firehose
  const firehose = await openLive(kiln, '/metrics/events?events=cache.*', ada.token);
  t.teardown(() => firehose.close());
  t.equal((await kiln.api('PUT', '/admin/webhooks', { token: ada.token, body: { url: adminHook.url, events: ['cache.*'] } })).status, 200);

  t.equal((await kiln.api('PUT', '/caches', { token: ada.token, body: { name: 'main', public: true } })).status, 200);
  t.equal((await kiln.api('PUT', '/caches/main/webhooks', { token: ada.token, body: { url: cacheHook.url } })).status, 200);
  t.equal((await kiln.api('PATCH', '/caches/main', { token: ada.token, body: { description: 'CI', priority: 30 } })).status, 200);
  t.equal((await kiln.api('DELETE', '/caches/main/active', { token: ada.token })).status, 200);
  t.equal((await kiln.api('POST', '/caches/main/active', { token: ada.token })).status, 200);

  // Webhook deliveries run in parallel: they arrive in no particular order (docs/events.md).
  const names = (list: { event: string }[]) => list.map((e) => e.event);
  // Deliveries are at least once: a redelivered event arrives with the very same body.
  const received = (hook: typeof adminHook) => [...new Set(hook.requests.map((r) => r.body))].map((b) => JSON.parse(b) as Delivered);
  const gotAll = (hook: typeof adminHook, count: number) => eventually(`${count} deliveries`, async () => (received(hook).length >= count ? true : undefined));
  const durable = ['cache.create', 'cache.update', 'cache.update', 'cache.update', 'cache.nar.upload', 'cache.nar.delete', 'cache.delete'];
  const sorted = (list: string[]) => [...list].sort();

  const nar = await makeTestNar(t, { f: 'an event\n' });
  const info = { store_path: nar.info.storePath, nar_hash: nar.info.narHash, nar_size: nar.info.narSize, references: [] };
  t.equal((await uploadSingle(kiln, ada.token, 'main', { narinfo: info, nar: nar.nar })).status, 200);
  t.equal((await uploadSingle(kiln, ada.token, 'main', { narinfo: info, nar: nar.nar })).status, 200, 'again: held, no second event');

  const narinfo = await fetch(`${kiln.url}/cache/main/${nar.hash}.narinfo`);
  t.equal(narinfo.status, 200);
  const url = /^URL: (.*)$/m.exec(await narinfo.text())![1]!;
  t.equal((await fetch(`${kiln.url}/cache/main/${'0'.repeat(32)}.narinfo`)).status, 404);
  t.equal((await fetch(`${kiln.url}/cache/main/${url}`, { method: 'HEAD' })).status, 200);
  const file = await fetch(`${kiln.url}/cache/main/${url}`);
  t.equal(file.status, 200);
  const fileSize = (await file.arrayBuffer()).byteLength;
  // Traffic events go out in batches (100 ms): seen before the cache is deleted, which ends its feed.
  await eventually('the traffic events on the firehose', async () => (firehose.frames.some((f) => f.event === 'cache.nar.fetched') ? true : undefined));

  t.equal((await kiln.api('DELETE', `/caches/main/nars/${nar.hash}`, { token: ada.token })).status, 200);
  // Deleting the cache drops what is still pending for its own webhook: wait for those first.
  await gotAll(cacheHook, durable.length - 2);
  t.equal((await kiln.api('DELETE', '/caches/main', { token: ada.token })).status, 200);


  t.test('the instance webhook gets every durable cache event', async (t) => {
    await gotAll(adminHook, durable.length);
    const bodies = received(adminHook);
    t.same(sorted(names(bodies)), sorted(durable), 'each durable event once');
    const of = (event: string) => bodies.filter((b) => b.event === event).map((b) => b.content);
    t.match(of('cache.create'), [{ cache: 'main', public: true }]);
    const updates = of('cache.update');
    t.match(updates.find((c) => (c['changes'] as string[]).includes('priority')), { cache: 'main', changes: ['description', 'priority'] });
    t.same(updates.filter((c) => (c['changes'] as string[]).includes('active')).map((c) => c['active']).sort(), [false, true]);
    t.match(of('cache.nar.upload'), [{ cache: 'main', store_path: nar.info.storePath, nar_hash: nar.info.narHash, nar_size: nar.info.narSize, user: 'ada' }]);
    t.match(of('cache.nar.delete'), [{ cache: 'main', hash: nar.hash, store_path: nar.info.storePath, last_copy: true }]);
  });

  t.test('the cache webhook gets those after its creation, but not cache.delete: it goes with its cache', async (t) => {
    await gotAll(cacheHook, durable.length - 2);
    await gotAll(adminHook, durable.length); // cache.delete was delivered where it could be
    t.same(sorted(names(received(cacheHook))), sorted(durable.slice(1, -1)));
  });

  t.test('the firehose shows the live-only events too', async (t) => {
    const frames = await eventually('cache.delete on the firehose', async () =>
      (firehose.frames.some((f) => f.event === 'cache.delete') ? firehose.frames : undefined));
    const live = frames.filter((f) => !durable.includes(f.event));
    const of = (event: string) => live.filter((f) => f.event === event).map((f) => f.content);
    t.same(of('cache.nar.signed'), [{ cache: 'main', store_path: nar.info.storePath, key_name: '127.0.0.1-main-1' }]);
    t.same(of('cache.narinfo.served'), [{ cache: 'main', hash: nar.hash, hit: true }, { cache: 'main', hash: '0'.repeat(32), hit: false }]);
    t.same(of('cache.nar.fetched'), [{ cache: 'main', hash: url.slice(4, 56), bytes: fileSize }], 'the GET, not the HEAD');
    t.same(of('cache.changed').map((c) => c['reason']), ['create', 'update', 'disabled', 'enabled', 'nar.upload', 'nar.delete', 'delete']);
    t.same(names(frames.filter((f) => durable.includes(f.event))), durable, 'one process publishes them in order');
  });
});
