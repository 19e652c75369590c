// Signing key rotation with real Nix (issue 20, item 8; docs/binary-cache.md, "Key rotation"): after
// POST /caches/{cache}/key/rotate the sign sweep re-signs every path with the new key, and during the
// overlap narinfos carry both keys' signatures, so `nix copy --from` works for clients trusting the
// old key, the new key, or both; once the overlap has ended (the test steps the injected clock) only
// the new key verifies. Paths uploaded after the rotation get the old key's signature at the next
// sweep while the overlap lasts. A rotation sooner than cache.keyRotationMinIntervalSecs after the
// last is refused.
import t from 'tap';
import { CacheKeysView } from '../../../protocol/index.js';
import { findSignatureWork, writeSignatures } from '../../../storage/index.js';
import { startTestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { steppedClock } from '../../support/clock.js';
import { buildFixturePaths } from '../../support/nixStore.js';
import { freshStore, netrcFile, nixOk, runNix } from '../../support/nixClient.js';

const HOUR_MS = 3_600_000;

t.test('key rotation with real Nix clients', async (t) => {
  const clock = steppedClock(new Date());
  const kiln = await startTestKiln(t, { 'cache.keyOverlapHours': 48, 'cache.keyRotationMinIntervalSecs': 600 }, { clock, upkeepTimers: false });
  const ada = await signUp(kiln, 'ada');
  const bob = await signUp(kiln, 'bob');
  const fixtures = buildFixturePaths();
  const before = [fixtures.file, fixtures.refs, fixtures.tree];
  const after = [fixtures.executable];
  const cache = await createTestCache(kiln.sql, 'rot', { public: true, ownerId: ada.id });
  const oldKey = cache.publicKey;
  const netrc = netrcFile(ada.token);
  await nixOk('nix', ['copy', '--to', `${kiln.url}/cache/rot`, ...before], { netrc });

  const substitutes = async (trusted: string, paths: string[]) => {
    const run = await runNix('nix', ['copy', '--from', `${kiln.url}/cache/rot`, '--to', freshStore(), '--option', 'trusted-public-keys', trusted, ...paths]);
    return run.status === 0 ? 'ok' : run.stderr;
  };
  const sigsOf = async (path: string): Promise<string[]> => {
    const out = await nixOk('nix', ['path-info', '--sigs', '--store', `${kiln.url}/cache/rot`, path]);
    return out.trim().split(/\s+/).slice(1);
  };
  const keyName = (key: string) => key.slice(0, key.indexOf(':'));
  const unrelated = 'other-1:3REoSjvMtmBzmoRZVZPZuB/MG/vyNbytXCID+0ocOAA=';

  t.test('bad requests are refused with a 4xx naming the problem', async (t) => {
    const negative = await kiln.api('POST', '/caches/rot/key/rotate', { token: ada.token, body: { overlap_hours: -1 } });
    t.equal(negative.status, 400);
    t.match(negative.message, /overlap_hours/);
    const tooLong = await kiln.api('POST', '/caches/rot/key/rotate', { token: ada.token, body: { overlap_hours: 9000 } });
    t.equal(tooLong.status, 400);
    const unknown = await kiln.api('POST', '/caches/rot/key/rotate', { token: ada.token, body: { overlap: 1 } });
    t.equal(unknown.status, 400);
    t.equal((await kiln.api('POST', '/caches/nope/key/rotate', { token: ada.token })).status, 404);
    t.equal((await kiln.api('POST', '/caches/rot/key/rotate', { token: bob.token })).status, 403, 'seeing a public cache is not managing it');
    const keys = CacheKeysView.parse((await kiln.api('GET', '/caches/rot/keys', { token: bob.token })).message);
    t.same(keys, { public_key: oldKey, previous: null }, 'nothing rotated');
  });

  let newKey = '';
  t.test('rotating: a new key N+1, the old one listed for the overlap, every path re-signed', async (t) => {
    const rotated = await kiln.api('POST', '/caches/rot/key/rotate', { token: ada.token });
    t.equal(rotated.status, 200, JSON.stringify(rotated.message));
    const keys = CacheKeysView.parse(rotated.message);
    newKey = keys.public_key;
    t.match(keyName(newKey), /-rot-2$/, 'the generation counts up');
    t.not(newKey, oldKey);
    t.equal(keys.previous?.public_key, oldKey);
    t.equal(keys.previous?.listed_until, new Date(clock.now().getTime() + 48 * HOUR_MS).toISOString(), 'cache.keyOverlapHours');
    t.equal((await kiln.api<string>('GET', '/caches/rot/key', { token: bob.token })).message, newKey, 'GET key names the key new clients trust');

    // The rotation woke the sweep in this process (cache.changed, reason key): nothing left to sign.
    await kiln.upkeep.settle();
    t.same(await kiln.upkeep.signSweep(), { signed: 0, keysEnded: 0, unsignable: 0 });
    const rows = await kiln.sql<{ signature: string; previous_signature: string | null }[]>`
      select s.signature, s.previous_signature from path_signatures s where s.cache_id = ${cache.id}`;
    t.equal(rows.length, before.length);
    for (const row of rows) {
      t.ok(row.signature.startsWith(`${keyName(newKey)}:`), 'signed by the new key');
      t.ok(row.previous_signature?.startsWith(`${keyName(oldKey)}:`), 'and by the old one');
    }
    t.same((await sigsOf(fixtures.refs)).map(keyName).sort(), [keyName(newKey), keyName(oldKey)].sort(), 'nix path-info --sigs shows both');
  });

  t.test('during the overlap, clients trusting either key substitute; others do not', async (t) => {
    t.equal(await substitutes(newKey, before), 'ok', 'new key only');
    t.equal(await substitutes(oldKey, before), 'ok', 'old key only');
    t.equal(await substitutes(`${oldKey} ${newKey}`, before), 'ok', 'both');
    t.not(await substitutes(unrelated, [fixtures.file]), 'ok', 'an unrelated key verifies nothing');
  });

  t.test('a path uploaded after the rotation: the new key at once, the old one after the sweep', async (t) => {
    await nixOk('nix', ['copy', '--to', `${kiln.url}/cache/rot`, ...after], { netrc });
    t.same((await sigsOf(fixtures.executable)).map(keyName), [keyName(newKey)]);
    t.equal(await substitutes(newKey, after), 'ok');
    t.not(await substitutes(oldKey, after), 'ok', 'not yet signed by the old key');
    t.same(await kiln.upkeep.signSweep(), { signed: 1, keysEnded: 0, unsignable: 0 });
    t.equal(await substitutes(oldKey, after), 'ok', 'the sweep added the old key\'s signature');
  });

  t.test('after the overlap only the new key verifies', async (t) => {
    clock.step(48 * HOUR_MS + 1);
    t.same(await kiln.upkeep.signSweep(), { signed: before.length + after.length, keysEnded: 1, unsignable: 0 }, 'the old signatures leave every row, the key goes');
    const keys = CacheKeysView.parse((await kiln.api('GET', '/caches/rot/keys', { token: bob.token })).message);
    t.same(keys, { public_key: newKey, previous: null });
    t.same((await sigsOf(fixtures.refs)).map(keyName), [keyName(newKey)]);
    t.equal(await substitutes(newKey, [...before, ...after]), 'ok');
    t.not(await substitutes(oldKey, [fixtures.file]), 'ok', 'the old key no longer verifies');
  });

  t.test('the sweep leaves a row an upload changed after it was read, and goes past one it cannot sign', async (t) => {
    const race = await createTestCache(kiln.sql, 'race', { public: true, ownerId: ada.id });
    const row = async (hash: string, narHash: string) => {
      const [path] = await kiln.sql<{ id: string }[]>`
        insert into cached_paths (hash_part, store_path, nar_hash, nar_size, file_hash, file_size, listing)
        values (${hash}, ${`/nix/store/${hash}-race`}, ${narHash}, 1, ${'1'.repeat(52)}, 1, '{}') returning id`;
      await kiln.sql`insert into path_signatures (cache_id, hash_part, cached_path_id, signature) values (${race.id}, ${hash}, ${path!.id}, 'gone-1:x')`;
    };
    await row('0'.repeat(32), 'sha256:not-a-hash');
    await row('1'.repeat(32), `sha256:${'0'.repeat(52)}`);
    const keyName = race.publicKey.slice(0, race.publicKey.indexOf(':'));
    const work = await findSignatureWork(kiln.sql, { cacheId: race.id, keyName, previousKeyName: null, after: '', limit: 10 });
    t.same(work.map((w) => w.hashPart), ['0'.repeat(32), '1'.repeat(32)]);
    // An upload re-signs the second row between the read and the write.
    await kiln.sql`update path_signatures set signature = ${`${keyName}:fresh`} where cache_id = ${race.id} and hash_part = ${'1'.repeat(32)}`;
    const written = await writeSignatures(kiln.sql, race.id, [{ ...work[1]!, readSignature: work[1]!.signature, signature: `${keyName}:stale`, previousSignature: null }]);
    t.same(written, [], 'the changed row is left alone');
    const [kept] = await kiln.sql<{ signature: string }[]>`select signature from path_signatures where cache_id = ${race.id} and hash_part = ${'1'.repeat(32)}`;
    t.equal(kept!.signature, `${keyName}:fresh`);
    await kiln.sql`update path_signatures set signature = 'gone-1:x' where cache_id = ${race.id}`;
    const report = await kiln.upkeep.signSweep();
    t.same(report, { signed: 1, keysEnded: 0, unsignable: 1 }, 'the row after the unsignable one is signed');
  });

  t.test('rotating again during an overlap ends the older key at once; overlap_hours 0 lists none', async (t) => {
    const second = CacheKeysView.parse((await kiln.api('POST', '/caches/rot/key/rotate', { token: ada.token, body: { overlap_hours: 1 } })).message);
    t.match(keyName(second.public_key), /-rot-3$/);
    t.equal(second.previous?.public_key, newKey);
    // cache.keyRotationMinIntervalSecs (600 s here) after the last rotation, not sooner.
    const soon = await kiln.api<string>('POST', '/caches/rot/key/rotate', { token: ada.token, body: { overlap_hours: 0 } });
    t.equal(soon.status, 409, 'a rotation at once after the last is refused');
    t.equal(soon.code, 'key_rotation_too_soon');
    t.equal(soon.headers.get('retry-after'), '600');
    t.match(soon.message, new Date(clock.now().getTime() + 600_000).toISOString(), 'the message names when the next is allowed');
    clock.step(599_999);
    const stillSoon = await kiln.api('POST', '/caches/rot/key/rotate', { token: ada.token, body: { overlap_hours: 0 } });
    t.equal(stillSoon.status, 409, 'one millisecond short of the interval');
    t.equal(stillSoon.headers.get('retry-after'), '1');
    t.match(CacheKeysView.parse((await kiln.api('GET', '/caches/rot/keys', { token: ada.token })).message), { public_key: second.public_key }, 'a refused rotation changed nothing');
    clock.step(1);
    const third = CacheKeysView.parse((await kiln.api('POST', '/caches/rot/key/rotate', { token: ada.token, body: { overlap_hours: 0 } })).message);
    t.match(keyName(third.public_key), /-rot-4$/);
    t.equal(third.previous, null, 'no overlap');
    await kiln.upkeep.settle();
    await kiln.upkeep.signSweep();
    t.equal(await substitutes(third.public_key, [...before, ...after]), 'ok', 'everything re-signed by key 4');
    t.not(await substitutes(second.public_key, [fixtures.file]), 'ok', 'key 3 was dropped with the rotation to 4');
  });
});
