// AddToStoreNar over SSH (services/ssh/cachePaths.ts add(), shared by ssh-ng and ssh://) against
// a hostile client, on a test kiln's real storage, upload budget and HTTP narinfo: a `ca` that
// is not a content address (a line break would inject lines into the narinfo the cache signs)
// is refused before a byte is read.
import t from 'tap';
import { sha256Nix32 } from '../../../protocol/index.js';
import { cachePaths, StoreRefusal, type ClientPathInfo, type SessionStore } from '../../../services/ssh/cachePaths.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { startTestKiln } from '../../support/kiln.js';
import { testNarIngest } from '../../support/narIngest.js';
import { makeTestNar, type TestNar } from '../../support/narStorage.js';

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

const clientInfo = (nar: TestNar, extra: Partial<ClientPathInfo> = {}): ClientPathInfo => ({
  path: nar.info.storePath, deriver: '', narHash: nar.info.narHash, references: [], narSize: nar.info.narSize, ca: '', ...extra,
});

t.test('AddToStoreNar over SSH', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  const cache = await createTestCache(kiln.sql, 'main', { public: true, ownerId: ada.id });
  const front = await testNarIngest(kiln);
  const store: SessionStore = {
    cache: { id: cache.id, name: 'main' }, canRead: true,
    writeTarget: { id: cache.id, name: 'main', uploader: 'ada', owner: ada.id },
  };
  const paths = cachePaths({ nars: kiln.nars, ingest: front.ingest }, store);
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
});
