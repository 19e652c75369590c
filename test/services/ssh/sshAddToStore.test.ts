// AddToStoreNar over SSH (services/ssh/cachePaths.ts add(), shared by ssh-ng and ssh://) against
// a hostile client, on a test kiln's real storage, upload budget and HTTP narinfo: a `ca` that
// is not a content address (a line break would inject lines into the narinfo the cache signs)
// is refused before a byte is read; a claimed NarSize past nar.maxUploadSize ends the session
// before an upload permit is asked for; a NAR that stalls while its permit is held loses it after
// upload.leaseIdleSecs (a stepped clock); a framed NAR longer than its NarSize ends the session at
// the first byte past it (it was read under a permit for NarSize bytes); an ImportPaths NAR (its
// size unknown until it ends) is staged past its first MiB only under a permit for
// nar.maxUploadSize, and with none to be had within upload.restWaitSecs the session ends having
// read no more.
import t from 'tap';
import { acquireUpload } from '../../../actors/index.js';
import { sha256Nix32 } from '../../../protocol/index.js';
import { NarLeases } from '../../../services/ssh/narLeases.js';
import { cachePaths, type ClientPathInfo, type SessionStore } from '../../../services/ssh/cachePaths.js';
import { SessionEnds, StoreRefusal } from '../../../services/ssh/sessionErrors.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { startTestKiln } from '../../support/kiln.js';
import { testNarIngest } from '../../support/narIngest.js';
import { makeTestNar, type TestNar } from '../../support/narStorage.js';
import { steppedClock } from '../../support/clock.js';

async function* once(bytes: Uint8Array): AsyncGenerator<Uint8Array> {
  yield bytes;
}

/** What `work` was rejected with (a test failure when it resolved). */
async function rejection(work: Promise<unknown>): Promise<unknown> {
  try {
    await work;
  } catch (e) {
    return e;
  }
  throw new Error('it was not refused');
}

/** Waits for `condition` (a bound that only stops a hung test, not a measurement). */
async function until(what: string, condition: () => boolean, limitMs = 20_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`gave up waiting: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const BYTES_BUDGET = 4 << 20;
const MAX_UPLOAD = 1 << 20;

/** A NAR the test hands over piece by piece, as a client that may stop sending; `pulls` counts the reads. */
function trickle() {
  const queue: (Uint8Array | 'end')[] = [];
  let wake: (() => void) | null = null;
  const state = { pulls: 0 };
  const push = (item: Uint8Array | 'end') => {
    queue.push(item);
    wake?.();
  };
  return {
    state,
    send: (bytes: Uint8Array) => push(bytes),
    end: () => push('end'),
    body: (async function* () {
      for (;;) {
        state.pulls++;
        while (queue.length === 0) await new Promise<void>((resolve) => (wake = resolve));
        const next = queue.shift()!;
        if (next === 'end') return;
        yield next;
      }
    })(),
  };
}

const clientInfo = (nar: TestNar, extra: Partial<ClientPathInfo> = {}): ClientPathInfo => ({
  path: nar.info.storePath, deriver: '', narHash: nar.info.narHash, references: [], narSize: nar.info.narSize, ca: '', ...extra,
});

t.test('AddToStoreNar over SSH', async (t) => {
  const kiln = await startTestKiln(t, { 'upload.bytesBudget': BYTES_BUDGET });
  const ada = await signUp(kiln, 'ada');
  const cache = await createTestCache(kiln.sql, 'main', { public: true, ownerId: ada.id });
  const front = await testNarIngest(kiln);
  const store: SessionStore = {
    who: { kind: 'user', userId: ada.id, username: 'ada' } as SessionStore['who'], project: null,
    cache: { id: cache.id, name: 'main' }, canRead: true,
    writeTarget: { id: cache.id, name: 'main', uploader: 'ada', owner: ada.id },
  };
  const clock = steppedClock(new Date('2026-11-26T12:00:00Z'));
  const leases = new NarLeases({ idleSecs: 300, clock });
  const paths = cachePaths({ nars: kiln.nars, ingest: front.ingest, maxUploadSize: MAX_UPLOAD, leases }, store);
  const permits = () => front.budget.getSnapshot().context.granted.length;
  const stored = async (nar: TestNar) => (await kiln.sql`select 1 from cached_paths where store_path = ${nar.info.storePath}`).length > 0;
  const narinfoOf = async (nar: TestNar) => (await fetch(`${kiln.url}/cache/main/${nar.hash}.narinfo`)).text();

  t.test('ca is checked as a narinfo CA line is', async (t) => {
    const nar = await makeTestNar(t, { f: 'content addressed\n' });
    const caHash = sha256Nix32(Buffer.alloc(32, 7));
    let drained = false;
    const injected = clientInfo(nar, { ca: `fixed:r:${caHash}\nSig: evil-1:${Buffer.alloc(64).toString('base64')}` });
    const refused = await rejection(paths.add(injected, once(nar.nar), async () => {
      drained = true;
    }));
    t.type(refused, StoreRefusal, 'a line break in ca is refused');
    t.match(refused, { message: /^ca: expected/ });
    t.ok(drained, 'the NAR is drained, so the session stays in step');
    t.notOk(await stored(nar), 'nothing was stored');

    for (const ca of ['fixed:r:', 'sha256:abc', 'text:sha256:zzz', 'fixed:md4:00']) {
      await t.rejects(paths.add(clientInfo(nar, { ca }), once(nar.nar), async () => undefined), { message: /^ca: / }, `"${ca}" is refused naming ca`);
    }

    const hex = Buffer.alloc(32, 7).toString('hex');
    await paths.add(clientInfo(nar, { ca: `fixed:r:sha256:${hex}` }), once(nar.nar), async () => undefined);
    t.ok(await stored(nar), 'a well-formed ca is stored');
    const text = await narinfoOf(nar);
    t.match(text, `\nCA: fixed:r:${caHash}\n`, 'its hash printed in nix32, as every narinfo hash');
    t.notMatch(text, /evil/);
  });

  t.test('a NarSize past nar.maxUploadSize ends the session before a permit is asked for', async (t) => {
    const nar = await makeTestNar(t, { f: 'claims to be huge\n' });
    // All of upload.bytesBudget in one permit: an add that asks for one waits.
    const held = await acquireUpload(front.budget, { bytes: BYTES_BUDGET });
    let drained = false;
    const adding = rejection(paths.add(clientInfo(nar, { narSize: MAX_UPLOAD + 1 }), once(nar.nar), async () => {
      drained = true;
    }));
    const first = await Promise.race([adding, until('a permit request', () => front.budget.getSnapshot().context.waiting.length > 0).then(() => 'waited for a permit')]);
    held.release();
    t.type(first, SessionEnds, 'refused on the claim, without waiting for a permit');
    t.match(first, { message: /more than nar\.maxUploadSize \(1048576\)/ });
    t.notOk(drained, 'the claimed bytes are not read: the session ends');
    await adding;
    t.notOk(await stored(nar), 'nothing was stored');
  });

  t.test('a NAR that stalls holding its permit loses it after upload.leaseIdleSecs', async (t) => {
    const nar = await makeTestNar(t, { f: 'a stalled NAR\n'.repeat(3000) });
    const third = Math.floor(nar.nar.length / 3);
    const client = trickle();
    const adding = rejection(paths.add(clientInfo(nar), client.body, async () => undefined));
    client.send(nar.nar.subarray(0, third));
    await until('the first piece to be read with a permit held', () => client.state.pulls === 2 && permits() === 1);

    clock.step(200_000);
    t.equal(leases.expireIdle(), 0, '200 s without data keeps the lease');
    client.send(nar.nar.subarray(third, 2 * third));
    await until('the second piece to be read', () => client.state.pulls === 3);
    clock.step(250_000); // 450 s since the start, 250 s since the last piece: data keeps the lease
    t.equal(leases.expireIdle(), 0, 'a NAR with recent data keeps going');
    t.equal(permits(), 1, 'and keeps its permit');
    clock.step(51_000);
    const expired = leases.expireIdle(); // no await since the step: the sweep timer cannot come first
    t.equal(expired, 1, 'past the lease the NAR ends');
    if (expired === 0) {
      // the lease failed: let the add finish instead of hanging
      client.send(nar.nar.subarray(2 * third));
      client.end();
    }
    const ended = await adding;
    t.type(ended, SessionEnds, 'the session ends: the rest of the NAR is still on the wire');
    t.match(ended, { message: /upload\.leaseIdleSecs/ });
    t.equal(permits(), 0, 'the permit is back');
    t.notOk(await stored(nar), 'nothing was stored');
    t.equal(leases.expireIdle(), 0, 'the lease is gone');
  });

  t.test('a NAR longer than its NarSize ends the session at the byte past it', async (t) => {
    const nar = await makeTestNar(t, { f: 'announced short\n'.repeat(20_000) });
    const client = trickle();
    const piece = 64 << 10;
    for (let at = 0; at < nar.nar.length; at += piece) client.send(nar.nar.subarray(at, at + piece));
    // then as much again: a framed stream ends where the client says, not at NarSize
    for (let at = 0; at < nar.nar.length; at += piece) client.send(nar.nar.subarray(at, at + piece));
    client.end();
    const claimedPieces = Math.ceil(nar.nar.length / piece);
    const ended = await rejection(paths.add(clientInfo(nar), client.body, async () => undefined));
    t.type(ended, SessionEnds, 'the session ends');
    t.match(ended, { message: /longer than its announced \d+ bytes/ });
    t.ok(client.state.pulls <= claimedPieces + 1, `no more was read than the first piece past NarSize (${client.state.pulls} reads)`);
    t.equal(permits(), 0, 'the permit is back');
    t.notOk(await stored(nar), 'nothing was stored');
  });

  t.test('ImportPaths stages a NAR past its first MiB only under a permit for nar.maxUploadSize', async (t) => {
    const importMax = 3 << 20;
    const importing = cachePaths({ nars: kiln.nars, ingest: front.ingest, maxUploadSize: importMax, leases }, store);
    const nar = await makeTestNar(t, { f: Buffer.alloc(3 << 19, 'exported, size unknown\n') }, [], 'exported');
    const trailer = async () => ({ path: nar.info.storePath, references: [], deriver: '' });
    const piece = 256 << 10;
    const pieces = Math.ceil(nar.nar.length / piece);
    const sendAll = (client: ReturnType<typeof trickle>, upTo = nar.nar.length) => {
      for (let at = 0; at < upTo; at += piece) client.send(nar.nar.subarray(at, Math.min(at + piece, upTo)));
    };

    // Every byte of upload.bytesBudget is held elsewhere: no permit comes within upload.restWaitSecs.
    const held = await acquireUpload(front.budget, { bytes: BYTES_BUDGET });
    const refusedClient = trickle();
    sendAll(refusedClient);
    refusedClient.end();
    const refused = rejection(importing.addExported(refusedClient.body, trailer));
    const first = await Promise.race([refused, until('the whole NAR to be read', () => refusedClient.state.pulls > pieces).then(() => 'read the whole NAR without a permit')]);
    held.release();
    t.type(first, SessionEnds, 'the session ends: the rest of the NAR is on the wire');
    t.match(first, { message: /no upload permit came within 1 s .*nar\.maxUploadSize/ });
    t.ok(refusedClient.state.pulls <= (1 << 20) / piece + 2, `no more than its first MiB was read (${refusedClient.state.pulls} reads of ${pieces + 1})`);
    await refused;
    t.notOk(await stored(nar), 'nothing was stored');
    t.equal(leases.holding, 0, 'the refused NAR holds no lease (test/services/ssh/importLeaseRelease.test.ts)');

    // With room in the budget the NAR is staged under one permit of nar.maxUploadSize bytes.
    const client = trickle();
    const adding = importing.addExported(client.body, trailer);
    sendAll(client, 1536 << 10);
    const grantedBytes = () => (front.budget.getSnapshot().context.granted as { bytes: number }[]).map((g) => g.bytes);
    await until('the NAR to be staged past its first MiB', () => client.state.pulls > (1536 << 10) / piece);
    t.same(grantedBytes(), [importMax], 'one permit of nar.maxUploadSize is held while it is staged');
    client.send(nar.nar.subarray(1536 << 10));
    client.end();
    await adding;
    t.ok(await stored(nar), 'the path is stored');
    t.equal(permits(), 0, 'the permit is back');
  });
});
