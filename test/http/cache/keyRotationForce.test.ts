// Emergency key re-rotation (docs/caches.md, "Key rotation"): inside cache.keyRotationMinIntervalSecs
// a rotation is refused (409) unless it carries `force: true`, which the cache's owner may send (an
// admin who is not the owner gets 403 owner_only) and a caller with superuser powers may send for
// any cache. A forced rotation is recorded on its durable cache.update event: who, whether as a
// superuser, and whether it beat the interval.
import t from 'tap';
import { CacheKeysView } from '../../../protocol/index.js';
import { startTestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { steppedClock } from '../../support/clock.js';

interface RotationEvent {
  key_name: string;
  forced?: boolean;
  by?: string | null;
  by_superuser?: boolean;
  interval_overridden?: boolean;
}

t.test('forced key rotation inside the minimum interval', async (t) => {
  const clock = steppedClock(new Date());
  const kiln = await startTestKiln(t, { 'cache.keyRotationMinIntervalSecs': 600 }, { clock });
  const root = await signUp(kiln, 'root'); // the first account: a superuser
  const owner = await signUp(kiln, 'owner');
  const admin = await signUp(kiln, 'admin');
  const stranger = await signUp(kiln, 'stranger');
  const cache = await createTestCache(kiln.sql, 'leak', { public: false, ownerId: owner.id });
  await kiln.sql`insert into cache_members (cache_id, user_id, role) values (${cache.id}, ${admin.id}, 'Admin')`;

  const rotate = (token: string, body: Record<string, unknown> = {}) => kiln.api<unknown>('POST', '/caches/leak/key/rotate', { token, body });
  const currentKey = async () => CacheKeysView.parse((await kiln.api('GET', '/caches/leak/keys', { token: owner.token })).message).public_key;
  const rotationEvents = async () => (await kiln.sql<{ body: string }[]>`
    select body from event_outbox where event = 'cache.update' and cache_id = ${cache.id} order by created_at, id`)
    .map((r) => (JSON.parse(r.body) as { content: RotationEvent }).content);
  const keyMakers = async (token: string, body: Record<string, unknown>) => {
    const res = await kiln.api<{ secret: string }>('POST', '/user/keys', { token, body });
    if (res.status !== 200) throw new Error(`key: ${res.status} ${JSON.stringify(res.message)}`);
    return res.message.secret;
  };

  t.equal((await rotate(owner.token)).status, 200, 'the first rotation needs no force');
  const second = await currentKey();
  t.match(second, /^[^:]+-leak-2:/);

  t.test('refused without force, naming the way out', async (t) => {
    const soon = await rotate(owner.token, { overlap_hours: 0 });
    t.equal(soon.status, 409);
    t.equal(soon.code, 'key_rotation_too_soon');
    t.equal(soon.headers.get('retry-after'), '600');
    t.match(soon.message, /"force": true/, 'the message names the override');
    t.equal(await currentKey(), second, 'nothing rotated');
  });

  t.test('force from anyone but the owner or a superuser is refused, and changes nothing', async (t) => {
    const byAdmin = await rotate(admin.token, { force: true, overlap_hours: 0 });
    t.equal(byAdmin.status, 403, 'an admin who is not the owner');
    t.equal(byAdmin.code, 'owner_only');
    t.match(byAdmin.message, /forced key rotation/);
    t.equal((await rotate(admin.token, { overlap_hours: 0 })).status, 409, 'the admin without force meets the interval');
    t.equal((await rotate(stranger.token, { force: true })).status, 404, 'a stranger does not even see the private cache');
    t.equal((await rotate(root.token)).status, 404, 'a superuser without force is a stranger (no implicit membership)');
    const narrowRootKey = await keyMakers(root.token, { name: 'narrow', permissions: ['manageCache'] });
    t.equal((await rotate(narrowRootKey, { force: true })).status, 404, 'a superuser\'s key without admin has no superuser powers');
    const bad = await rotate(owner.token, { force: 'yes' });
    t.equal(bad.status, 400);
    t.match(bad.message, /force/);
    t.equal(await currentKey(), second, 'nothing rotated');
    t.same((await rotationEvents()).filter((e) => e.forced === true), [], 'no forced rotation recorded');
  });

  t.test('the owner forces a rotation: done, and recorded on the event', async (t) => {
    const forced = CacheKeysView.parse((await rotate(owner.token, { force: true, overlap_hours: 0 })).message);
    t.match(forced.public_key, /-leak-3:/);
    t.equal(forced.previous, null, 'overlap 0: the leaked key is listed no more');
    const last = (await rotationEvents()).at(-1)!;
    t.match(last, { key_name: /-leak-3$/, forced: true, by: 'owner', by_superuser: false, interval_overridden: true });
  });

  t.test('a superuser forces a rotation of a cache it is no member of', async (t) => {
    const rootKey = await keyMakers(root.token, { name: 'operator', permissions: ['admin'] });
    const forced = CacheKeysView.parse((await rotate(rootKey, { force: true })).message);
    t.match(forced.public_key, /-leak-4:/);
    const last = (await rotationEvents()).at(-1)!;
    t.match(last, { key_name: /-leak-4$/, forced: true, by: 'root', by_superuser: true, interval_overridden: true });
    t.equal((await rotate(owner.token)).status, 409, 'the forced rotation restarts the interval');
  });

  t.test('force after the interval is an ordinary rotation, still recorded as forced', async (t) => {
    clock.step(600_000);
    t.equal((await rotate(owner.token, { force: true })).status, 200);
    t.match((await rotationEvents()).at(-1)!, { key_name: /-leak-5$/, forced: true, by: 'owner', interval_overridden: false });
    clock.step(600_000);
    t.equal((await rotate(admin.token)).status, 200, 'an admin rotates without force after the interval');
    t.notOk((await rotationEvents()).at(-1)!.forced, 'an unforced rotation carries no forced mark');
  });
});
