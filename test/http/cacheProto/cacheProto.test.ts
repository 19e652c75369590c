// GET /cache/{cache}/proto, the cache protocol (docs/cache-protocol.md), as a real WebSocket client
// sees it: queries answer with the narinfos GET {hash}.narinfo serves, byte for byte; a NAR comes
// as the bytes GET nar/… serves; private caches need credentials with viewCache; anonymous
// connections follow proto.anonymousCache.*; bad frames close with a code and a reason.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Packr } from 'msgpackr';
import { startTestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { addCacheMember, createTestCache } from '../../support/caches.js';
import { buildFixturePaths, nixStoreAdd, tempDir } from '../../support/nixStore.js';
import { createApiKey, localNar, uploadChunked } from '../../support/narUploads.js';
import { eventually } from '../../support/eventually.js';
import { basicHeader, collectNar, downloadNar, openCacheProto, refusalOf, type CacheProtoClient } from '../../support/cacheProtoClient.js';
import type { CacheServerMessage } from '../../../protocol/index.js';

const MISSING = '0'.repeat(32);
const isPaths = (id: number) => (m: CacheServerMessage): m is Extract<CacheServerMessage, { t: 'paths' }> => m.t === 'paths' && m.id === id;
const isError = (id: number) => (m: CacheServerMessage): m is Extract<CacheServerMessage, { t: 'error' }> => m.t === 'error' && m.id === id;
const packr = new Packr({ useRecords: false });

/** Opens a raw socket past `ready`, sends `frame` and resolves with the server's close. */
async function closeAfter(kiln: { url: string }, cache: string, frame: Buffer | string, binary = true): Promise<{ code: number; reason: string }> {
  const client = await openCacheProto(kiln, cache);
  client.socket.send(frame, { binary });
  return client.closed;
}

t.test('the cache protocol', async (t) => {
  // nar.smallBytes small enough that the tree fixture's NAR file is streamed from storage, not memory.
  const kiln = await startTestKiln(t, { 'nar.smallBytes': 1024 });
  const ada = await signUp(kiln, 'ada');
  const bob = await signUp(kiln, 'bob');
  const cat = await signUp(kiln, 'cat');
  await createTestCache(kiln.sql, 'pub', { public: true, ownerId: ada.id });
  const secret = await createTestCache(kiln.sql, 'secret', { public: false, ownerId: ada.id });
  await createTestCache(kiln.sql, 'other', { public: false, ownerId: bob.id });
  await addCacheMember(kiln.sql, secret.id, bob.id, 'View');
  const fixtures = buildFixturePaths();
  const tree = localNar(fixtures.tree);
  const file = localNar(fixtures.file);
  for (const nar of [tree, file]) t.equal((await uploadChunked(kiln, ada.token, 'pub', nar)).status, 200);
  t.equal((await uploadChunked(kiln, ada.token, 'secret', file)).status, 200);
  // 24 MiB of random bytes: more than the kernel's socket buffers hold, so a paused reader stalls its download
  const dir = tempDir('kiln-cache-proto-');
  mkdirSync(join(dir, 'big'));
  writeFileSync(join(dir, 'big', 'random'), randomBytes(24 * 1024 * 1024));
  const big = localNar(nixStoreAdd(join(dir, 'big')));
  t.equal((await uploadChunked(kiln, ada.token, 'pub', big, 4 * 1024 * 1024)).status, 200);
  const bobView = await createApiKey(kiln, bob.token, 'view', ['viewCache']);
  const bobNoView = await createApiKey(kiln, bob.token, 'no-view', ['viewProject']);
  const pinnedElsewhere = (await kiln.api<{ secret: string }>('POST', '/user/keys', { token: bob.token, body: { name: 'pinned', permissions: ['viewCache'], cache: 'other' } })).message.secret;
  const httpBytes = async (path: string, headers: Record<string, string> = {}) => {
    const res = await fetch(`${kiln.url}${path}`, { headers });
    return { status: res.status, bytes: Buffer.from(await res.arrayBuffer()) };
  };

  t.test('ready, then a query: hits and misses as GET {hash}.narinfo answers them, byte for byte', async (t) => {
    const client = await openCacheProto(kiln, 'pub');
    t.match(client.ready, { t: 'ready', cache: 'pub', limits: { maxQueryHashes: 500, maxInFlight: 16 } });
    client.send({ v: 1, t: 'query', id: 7, hashes: [tree.hash, MISSING, file.hash] });
    const paths = await client.next(isPaths(7));
    t.same(paths.missing, [MISSING]);
    t.same(paths.found.map((f) => f.hash), [tree.hash, file.hash]);
    for (const found of paths.found) {
      const http = await httpBytes(`/cache/pub/${found.hash}.narinfo`);
      t.equal(http.status, 200);
      t.ok(Buffer.from(found.narinfo, 'utf8').equals(http.bytes), `${found.hash}: the same bytes as GET`);
    }
    t.equal((await httpBytes(`/cache/pub/${MISSING}.narinfo`)).status, 404, 'the miss is a 404 over HTTP too');
    client.close();
  });

  t.test('a NAR streamed equals GET nar/… (from storage and from memory); a missing one is an error frame', async (t) => {
    const client = await openCacheProto(kiln, 'pub');
    for (const [i, nar] of [tree, file].entries()) {
      const got = await downloadNar(client, i, nar.hash);
      if (!('start' in got)) throw new Error(JSON.stringify(got));
      const narinfo = (await httpBytes(`/cache/pub/${nar.hash}.narinfo`)).bytes.toString('utf8');
      const url = /^URL: (.*)$/m.exec(narinfo)![1]!;
      t.equal(got.start.url, url, 'narStart names the narinfo URL');
      const http = await httpBytes(`/cache/pub/${url}`);
      t.equal(got.start.size, http.bytes.length, 'narStart says the size');
      t.ok(got.bytes.equals(http.bytes), `${nar.hash}: the bytes of GET ${url}`);
    }
    const missing = await downloadNar(client, 9, MISSING);
    t.match(missing, { t: 'error', id: 9, code: 'not_found', message: `cache "pub" has no path ${MISSING}` });
    client.close();
  });

  t.test('private caches: anonymous looks like no cache; view keys work; others are refused', async (t) => {
    const unknown = await refusalOf(openCacheProto(kiln, 'nope'));
    const anonymous = await refusalOf(openCacheProto(kiln, 'secret'));
    t.equal(unknown.closeCode, 4404);
    t.same([anonymous.closeCode, anonymous.closeReason], [unknown.closeCode, (unknown.closeReason ?? '').replace('"nope"', '"secret"')], 'anonymous on a private cache: as an unknown one');
    t.match(anonymous.closeReason, /^not_found: no cache "secret"/);
    for (const [what, authorization] of [['Bearer key', `Bearer ${bobView}`], ['Basic key', basicHeader(bobView)], ['Basic session', basicHeader(bob.token)]] as const) {
      const client = await openCacheProto(kiln, 'secret', { authorization });
      client.send({ v: 1, t: 'query', id: 1, hashes: [file.hash, tree.hash] });
      const paths = await client.next(isPaths(1));
      const http = await httpBytes(`/cache/secret/${file.hash}.narinfo`, { authorization: basicHeader(bobView) });
      t.ok(Buffer.from(paths.found[0]!.narinfo).equals(http.bytes), `${what}: the private narinfo`);
      t.same(paths.missing, [tree.hash], `${what}: what the cache lacks`);
      client.close();
    }
    const noView = await refusalOf(openCacheProto(kiln, 'secret', { authorization: `Bearer ${bobNoView}` }));
    t.same([noView.closeCode, noView.closeReason], [4403, 'forbidden: viewCache is required on cache "secret"'], 'a key without viewCache');
    const pinned = await refusalOf(openCacheProto(kiln, 'secret', { authorization: `Bearer ${pinnedElsewhere}` }));
    t.equal(pinned.closeCode, 4404, 'a key pinned to another cache sees no cache');
    const stranger = await refusalOf(openCacheProto(kiln, 'secret', { authorization: `Bearer ${cat.token}` }));
    t.same([stranger.closeCode, stranger.closeReason], [4404, anonymous.closeReason], 'a stranger: no cache');
    // Junk credentials tell a private cache from no cache no more than no credentials do.
    const bad = await refusalOf(openCacheProto(kiln, 'secret', { authorization: 'Bearer SVCnot-a-key' }));
    const badUnknown = await refusalOf(openCacheProto(kiln, 'nope', { authorization: 'Bearer SVCnot-a-key' }));
    t.same([bad.closeCode, bad.closeReason], [4404, anonymous.closeReason], 'an unknown token on a private cache: no cache');
    t.same([badUnknown.closeCode, badUnknown.closeReason], [4404, unknown.closeReason], 'an unknown token on no cache: the same');
    const badPublic = await refusalOf(openCacheProto(kiln, 'pub', { authorization: 'Bearer SVCnot-a-key' }));
    t.equal(badPublic.closeCode, 4401, 'an unknown token on a public cache: unauthorized');
    for (const name of ['-dash', '.dot', 'a b', 'x'.repeat(64)]) {
      const odd = await refusalOf(openCacheProto(kiln, name));
      t.match(odd, { status: 404, body: { code: 'not_found' } }, `a name no cache may have (${JSON.stringify(name)}): 404 at the upgrade`);
    }
    const garbled = await refusalOf(openCacheProto(kiln, 'pub', { authorization: 'Token abc' }));
    t.match(garbled, { status: 401, body: { code: 'invalid_token' } }, 'an Authorization header of another scheme is refused, not taken as anonymous');
    const plain = await fetch(`${kiln.url}/cache/pub/proto`);
    t.match([plain.status, await plain.json()], [426, { code: 'websocket_required' }], 'a plain GET');
  });

  t.test('access is decided again: a cache made private closes its anonymous connections', async (t) => {
    await createTestCache(kiln.sql, 'flip', { public: true, ownerId: ada.id });
    const asking = await openCacheProto(kiln, 'flip');
    const idle = await openCacheProto(kiln, 'flip');
    asking.send({ v: 1, t: 'query', id: 1, hashes: [MISSING] });
    t.same((await asking.next(isPaths(1))).missing, [MISSING], 'read while public');
    t.equal((await kiln.api('PATCH', '/caches/flip', { token: ada.token, body: { public: false } })).status, 200);
    asking.send({ v: 1, t: 'query', id: 2, hashes: [MISSING] });
    t.match(await asking.closed, { code: 4404, reason: /^not_found: no cache "flip"/ }, 'the next query: closed as no cache');
    t.match(await idle.closed, { code: 4404, reason: /^not_found: no cache "flip"/ }, 'an idle connection: closed on the change');
    t.notOk(asking.frames.some((m) => m.t === 'paths' && m.id === 2), 'no answer after the change');
  });

  t.test('bad frames close the connection with a code and a reason; the server goes on', async (t) => {
    t.same(await closeAfter(kiln, 'pub', 'hello', false), { code: 4002, reason: 'malformed_message: text frames are not part of the cache protocol' });
    t.match(await closeAfter(kiln, 'pub', Buffer.from([0xc1, 0xff, 0x00])), { code: 4002, reason: /^malformed_message: not a MessagePack value/ });
    t.same(await closeAfter(kiln, 'pub', packr.pack([1, 2])), { code: 4002, reason: 'malformed_message: expected a map with "v" and "t"' });
    t.same(await closeAfter(kiln, 'pub', packr.pack({ v: 2, t: 'query', id: 1, hashes: [MISSING] })), { code: 4001, reason: 'unsupported_version: "v" must be 1, the cache protocol version this server speaks' });
    t.same(await closeAfter(kiln, 'pub', packr.pack({ v: 1, t: 'explode', id: 1 })), { code: 4002, reason: 'malformed_message: unknown message type "explode"' });
    t.match(await closeAfter(kiln, 'pub', packr.pack({ v: 1, t: 'query', id: 1, hashes: ['../../etc/passwd'] })), { code: 4002, reason: /^malformed_message: query\.hashes\.0: a store path hash part/ });
    t.match(await closeAfter(kiln, 'pub', packr.pack({ v: 1, t: 'query', id: 1, hashes: Array(501).fill(MISSING) })), { code: 4002, reason: /^malformed_message: query\.hashes: / });
    t.match(await closeAfter(kiln, 'pub', packr.pack({ v: 1, t: 'nar', id: 1, hash: MISSING, extra: true })), { code: 4002, reason: /^malformed_message: nar\.extra/ });
    t.same(await closeAfter(kiln, 'pub', Buffer.alloc(100 * 1024, 0x90)), { code: 1009, reason: `message_too_large: the frame is ${100 * 1024} bytes, over the cap of ${64 * 1024}` });
    // Past the 1 MiB uWS itself reads, uWS drops the connection without a close frame (documented).
    // (1006 at the main thread's listener; a serving thread's relay passes it on as 1000)
    const huge = await closeAfter(kiln, 'pub', Buffer.alloc(2 * 1024 * 1024, 0x90));
    t.ok([1000, 1006].includes(huge.code), `a frame past what uWS reads: the connection is dropped (${huge.code})`);
    const client = await openCacheProto(kiln, 'pub');
    client.send({ v: 1, t: 'query', id: 1, hashes: [tree.hash] });
    t.equal((await client.next(isPaths(1))).found.length, 1, 'the server answers as before');
    client.close();
  });

  t.test('backpressure: a client that stops reading holds the server to about 1 MiB unwritten', async (t) => {
    const client = await openCacheProto(kiln, 'pub');
    client.socket.pause();
    client.send({ v: 1, t: 'nar', id: 1, hash: big.hash });
    // The server writes until the kernel's buffers are full, then holds at its high-water mark.
    await eventually(() => kiln.cacheProto.unwrittenBytes >= 1024 * 1024);
    let most = 0;
    for (let i = 0; i < 50; i++) {
      most = Math.max(most, kiln.cacheProto.unwrittenBytes);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    t.ok(most <= 1024 * 1024 + 256 * 1024 + 1024, `at most the high-water mark and one chunk unwritten (the most seen: ${most} bytes)`);
    const download = collectNar(client, 1);
    client.socket.resume();
    const got = await download;
    if (!('start' in got)) throw new Error(JSON.stringify(got));
    const http = await httpBytes(`/cache/pub/${got.start.url}`);
    t.equal(got.bytes.length, http.bytes.length);
    t.ok(got.bytes.equals(http.bytes), 'then the whole file, the bytes GET sends');
    client.close();
  });

  t.test('requests in flight are bounded; a reused id is refused; cancel ends a download', async (t) => {
    const client = await openCacheProto(kiln, 'pub');
    // A paused reader: each download of the big NAR stays in flight until the client reads again.
    client.socket.pause();
    for (let i = 0; i < 16; i++) client.send({ v: 1, t: 'nar', id: i, hash: big.hash });
    client.send({ v: 1, t: 'query', id: 16, hashes: [tree.hash] });
    client.send({ v: 1, t: 'nar', id: 3, hash: big.hash });
    for (let i = 0; i < 16; i++) client.send({ v: 1, t: 'cancel', id: i });
    client.socket.resume();
    t.match(await client.next(isError(16)), { code: 'too_many_requests', message: '16 requests are already being answered on this connection' }, 'the 17th in flight');
    t.match(await client.next(isError(3)), { code: 'duplicate_id', message: 'request 3 is still being answered' }, 'an id in flight again');
    for (let i = 0; i < 16; i++) await client.next((m): m is Extract<CacheServerMessage, { t: 'end' }> => m.t === 'end' && m.id === i);
    t.pass('every cancelled download ends');
    client.send({ v: 1, t: 'query', id: 16, hashes: [tree.hash] });
    t.equal((await client.next(isPaths(16))).found.length, 1, 'the ids are free again');
    client.close();
  });

  t.test('at most 2 NAR downloads run at once per connection; the third starts when one ends', async (t) => {
    const client = await openCacheProto(kiln, 'pub');
    for (const id of [1, 2, 3]) client.send({ v: 1, t: 'nar', id, hash: big.hash });
    for (const id of [1, 2, 3]) await client.next((m): m is Extract<CacheServerMessage, { t: 'end' }> => m.t === 'end' && m.id === id);
    const at = (t: string, id: number) => client.frames.findIndex((m) => m.t === t && 'id' in m && m.id === id);
    t.ok(at('narStart', 1) >= 0 && at('narStart', 2) >= 0, 'two started');
    t.ok(at('narStart', 3) > Math.min(at('end', 1), at('end', 2)), 'the third only after one of them ended');
    client.close();
  });

  t.test('the anonymous bound per client address: the 33rd refused, a freed slot usable again', async (t) => {
    const from = (address: string) => ({ 'x-forwarded-for': address });
    const held: CacheProtoClient[] = [];
    for (let i = 0; i < 32; i++) held.push(await openCacheProto(kiln, 'pub', from('203.0.113.7')));
    const refused = await refusalOf(openCacheProto(kiln, 'pub', from('203.0.113.7')));
    t.equal(refused.status, 429);
    t.match(refused.body, { code: 'too_many_connections', message: /^32 anonymous cache protocol connections are open from 203\.0\.113\.7/ });
    const other = await openCacheProto(kiln, 'pub', from('203.0.113.8'));
    t.pass('another address is not bounded by this one');
    other.close();
    const keyed = await openCacheProto(kiln, 'pub', { ...from('203.0.113.7'), authorization: `Bearer ${bobView}` });
    t.pass('a connection with credentials is not anonymous');
    keyed.close();
    held.pop()!.close();
    const again = await eventually(() => openCacheProto(kiln, 'pub', from('203.0.113.7')).catch(() => null));
    t.pass('a freed slot is usable again');
    again.close();
    for (const client of held) client.close();
    // IPv6: a host commonly holds a whole /64, so the /64 is what is counted.
    const held6: CacheProtoClient[] = [];
    for (let i = 1; i <= 32; i++) held6.push(await openCacheProto(kiln, 'pub', from(`2001:db8:0:7::${i.toString(16)}`)));
    const refused6 = await refusalOf(openCacheProto(kiln, 'pub', from('2001:db8:0:7:ffff:1:2:3')));
    t.match(refused6, { status: 429, body: { message: /open from 2001:db8:0:7:ffff:1:2:3/ } }, 'another address of the same /64: refused');
    const other6 = await openCacheProto(kiln, 'pub', from('2001:db8:0:8::1'));
    t.pass('another /64 is not bounded by this one');
    other6.close();
    for (const client of held6) client.close();
  });
});

t.test('proto.anonymousCache.enable false: anonymous connections are refused, keys still work', async (t) => {
  const kiln = await startTestKiln(t, { 'proto.anonymousCache.enable': false, 'proto.maxConnections': 2 });
  const ada = await signUp(kiln, 'ada');
  await createTestCache(kiln.sql, 'pub', { public: true, ownerId: ada.id });
  const refused = await refusalOf(openCacheProto(kiln, 'pub'));
  t.match(refused, { status: 401, body: { code: 'unauthorized', message: /proto\.anonymousCache\.enable/ } });
  const client = await openCacheProto(kiln, 'pub', { authorization: `Bearer ${ada.token}` });
  t.equal(client.ready.cache, 'pub');
  const second = await openCacheProto(kiln, 'pub', { authorization: `Bearer ${ada.token}` });
  const third = await refusalOf(openCacheProto(kiln, 'pub', { authorization: `Bearer ${ada.token}` }));
  t.match(third, { status: 429, body: { code: 'too_many_connections', message: /^2 cache protocol connections are open on this server \(proto\.maxConnections\)/ } }, 'the server-wide bound (proto.maxConnections)');
  second.close();
  client.close();
});

t.test('an IPv4 client is one address however spelled, also through serving threads (their relayed peer)', async (t) => {
  // http.threads 2: every connection comes through a thread, which vouches for its peer as its uWS
  // socket prints it (0000:…:ffff:7f00:0001); the loopback proxy must still be trusted for X-Forwarded-For
  const kiln = await startTestKiln(t, { 'http.threads': 2, 'proto.anonymousCache.maxConnectionsPerIp': 2 });
  const ada = await signUp(kiln, 'ada');
  await createTestCache(kiln.sql, 'pub', { public: true, ownerId: ada.id });
  const from = (address: string) => ({ 'x-forwarded-for': address });
  const held = [await openCacheProto(kiln, 'pub', from('203.0.113.7')), await openCacheProto(kiln, 'pub', from('::ffff:203.0.113.7'))];
  const refused = await refusalOf(openCacheProto(kiln, 'pub', from('0:0:0:0:0:ffff:203.0.113.7')));
  t.match(refused, { status: 429, body: { message: /^2 anonymous cache protocol connections are open from 203\.0\.113\.7 / } }, 'the third spelling: the same address, refused');
  const other = await openCacheProto(kiln, 'pub', from('0:0:0:0:0:ffff:198.51.100.3'));
  t.pass('another IPv4 address, mapped, is not counted with it (nor with every mapped address)');
  const twoLines = await refusalOf(openCacheProto(kiln, 'pub', { 'x-forwarded-for': ['198.51.100.99', '203.0.113.7'] }));
  t.match(twoLines, { status: 429, body: { message: /open from 203\.0\.113\.7 / } }, 'through a thread: the proxy\'s own X-Forwarded-For line after the client\'s is read');
  for (const client of [...held, other]) client.close();
});

t.test('X-Forwarded-For in several lines: the last (the proxy\'s own) counts, not the first the client wrote', async (t) => {
  const kiln = await startTestKiln(t, { 'proto.anonymousCache.maxConnectionsPerIp': 1 });
  const ada = await signUp(kiln, 'ada');
  await createTestCache(kiln.sql, 'pub', { public: true, ownerId: ada.id });
  const held = await openCacheProto(kiln, 'pub', { 'x-forwarded-for': '203.0.113.7' });
  const spoofed = await refusalOf(openCacheProto(kiln, 'pub', { 'x-forwarded-for': ['198.51.100.99', '203.0.113.7'] }));
  t.match(spoofed, { status: 429, body: { message: /open from 203\.0\.113\.7 / } }, 'the client\'s line names another address: still counted as 203.0.113.7');
  held.close();
});
