// Pins at scale (issue 20, item 3; docs/gc.md, "Pins"): GET /caches/{cache}/pins answers a page at a
// time (page, per_page: 50 by default, at most 200; total), and PUT/DELETE take from a token bucket
// per user (burst 300, one back per 200 ms), whichever session or API key the user sends and
// whatever address they come from. Through a real server; the rate limiter's clock is stepped.
import t from 'tap';
import { PinPage, PinView } from '../../../protocol/index.js';
import { pinWriteRateLimit } from '../../../http/api/v1/cachePins.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { startTestKiln } from '../../support/kiln.js';
import { makeTestNar } from '../../support/narStorage.js';
import { createApiKey, uploadSingle } from '../../support/narUploads.js';

t.test('pins: pages and the per-user write limit', async (t) => {
  let now = 1_700_000_000_000;
  const kiln = await startTestKiln(t, {}, { rateLimitClock: { now: () => now } });
  const ada = await signUp(kiln, 'ada');
  const bob = await signUp(kiln, 'bob');
  const main = await createTestCache(kiln.sql, 'main', { ownerId: ada.id, public: true });
  const nar = await makeTestNar(t, { f: 'pin me\n' }, [], 'pinned');
  const uploaded = await uploadSingle(kiln, ada.token, 'main', {
    narinfo: { store_path: nar.info.storePath, nar_hash: nar.info.narHash, nar_size: nar.info.narSize, references: nar.info.references },
    nar: nar.nar,
  });
  t.equal(uploaded.status, 200);

  t.test('GET …/pins: newest first, a page at a time', async (t) => {
    // 120 pins, one a minute; the hash parts are made up (a pin outlives the path it names).
    const hashes = Array.from({ length: 120 }, (_, i) => String(i).padStart(32, '0'));
    await kiln.sql`
      insert into cache_pins (cache_id, hash_part, created_at)
      select ${main.id}, h, now() - make_interval(mins => n::int) from unnest(${hashes}::text[]) with ordinality as x(h, n)`;
    const page = async (query: string) => kiln.api<PinPage>('GET', `/caches/main/pins${query}`, { token: bob.token });
    const first = await page('');
    t.equal(first.status, 200);
    const parsed = PinPage.parse(first.message);
    t.match(parsed, { page: 1, per_page: 50, total: 120 }, 'page 1 of 50 by default, the total of every pin');
    t.same(parsed.pins.map((p) => p.hash), hashes.slice(0, 50), 'newest first');
    const all: string[] = [];
    for (let n = 1; n <= 3; n++) all.push(...PinPage.parse((await page(`?page=${n}&per_page=45`)).message).pins.map((p) => p.hash));
    t.same(all, hashes, 'pages of 45 add up to every pin once, in order');
    t.same(PinPage.parse((await page('?page=7&per_page=20')).message).pins, [], 'past the last page: none');
    t.equal(PinPage.parse((await page('?per_page=200')).message).pins.length, 120, 'at most 200 a page');
    for (const bad of ['?per_page=201', '?per_page=0', '?page=0', '?page=x', '?cursor=1']) {
      const res = await page(bad);
      t.equal(res.status, 400, `${bad}: 400`);
      t.equal(res.code, 'invalid_query');
    }
    await kiln.sql`delete from cache_pins where cache_id = ${main.id}`;
  });

  t.test('PUT and DELETE: a bucket per user', async (t) => {
    const adaKey = await createApiKey(kiln, ada.token, 'pins', ['writeStore', 'viewCache']);
    const unpin = (token: string, headers: Record<string, string> = {}) => kiln.api('DELETE', `/caches/main/pins/${'1'.repeat(32)}`, { token, headers });
    t.equal(pinWriteRateLimit.burst, 300);
    // The session and the key of the same user, from two addresses, drain one bucket.
    for (let i = 0; i < 300; i++) {
      const res = await unpin(i % 2 === 0 ? ada.token : adaKey, { 'x-forwarded-for': i % 3 === 0 ? '203.0.113.1' : '203.0.113.2' });
      if (res.status !== 404) {
        t.fail(`write ${i} of the burst answered ${res.status}`);
        break;
      }
    }
    const refused = await unpin(adaKey);
    t.equal(refused.status, 429, 'the 301st pin write of the user is refused');
    t.equal(refused.code, 'rate_limited');
    t.equal(refused.headers.get('retry-after'), '1', '200 ms, rounded up to a second');
    t.match(refused.message, /user ada/, 'the refusal names whose bucket is empty');
    t.equal((await kiln.api('PUT', `/caches/main/pins/${nar.hash}`, { token: ada.token, body: {} })).status, 429, 'PUT shares the bucket with DELETE');
    t.equal((await unpin(bob.token)).status, 403, 'another user from the same address has a bucket of his own (and no writeStore)');
    t.equal((await kiln.api('GET', '/caches/main/pins', { token: ada.token })).status, 200, 'listing is not a pin write');

    now += 199;
    t.equal((await unpin(ada.token)).status, 429, 'no token back before 200 ms');
    now += 1;
    const pinned = await kiln.api<PinView>('PUT', `/caches/main/pins/${nar.hash}`, { token: ada.token, body: {} });
    t.equal(pinned.status, 200, 'one token back at 200 ms');
    t.equal((await unpin(ada.token)).status, 429, 'and only one');
    t.same((await kiln.sql`select hash_part from cache_pins where cache_id = ${main.id}`).map((r) => r['hash_part']), [nar.hash], 'refused writes changed nothing');
  });
});
