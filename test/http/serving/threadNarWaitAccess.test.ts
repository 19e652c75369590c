// A serving thread looks a NAR request's grant up again after every wait (http/serving/threadNars.ts,
// stillGranted; review r7a-4): a request that waited for a read place (up to
// nar.storageOpenTimeoutSecs) while its cache was made private, or its path deleted, is answered
// by the main thread (401, 404), not with the bytes it was granted before the wait. The test holds
// the only place of nar.maxConcurrentDownloads itself (the count is shared memory), so that every
// reader a thread takes waits in that thread's line.
import { randomBytes } from 'node:crypto';
import t, { type Test } from 'tap';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { eventually } from '../../support/eventually.js';
import { startTestKiln, type TestKiln } from '../../support/kiln.js';
import { makeTestNar } from '../../support/narStorage.js';
import { uploadSingle } from '../../support/narUploads.js';
import { fetchFresh, threadSum } from '../../support/servingThreads.js';
import { SharedReadPlaces, type ReadPaceLimits } from '../../../storage/index.js';

const READERS = 12;
const NO_PACE: ReadPaceLimits = { minBytesPerSec: 1, checkMs: 3_600_000 };

interface Waited { kiln: TestKiln; token: string; hash: string; url: string; size: number; release(): Promise<string[]> }

/** Readers of a public cache's small file, each on a connection of its own, all waiting for the place the test holds. */
async function waitingReaders(t: Test): Promise<Waited> {
  const kiln = await startTestKiln(t, { 'http.threads': 2, 'nar.maxConcurrentDownloads': 1, 'nar.storageOpenTimeoutSecs': 120 }, { narReadPace: NO_PACE });
  const owner = await signUp(kiln, 'owner');
  await createTestCache(kiln.sql, 'open', { public: true, ownerId: owner.id });
  const nar = await makeTestNar(t, { blob: randomBytes(32 * 1024) }, [], 'waited');
  const uploaded = await uploadSingle(kiln, owner.token, 'open', {
    narinfo: { store_path: nar.info.storePath, nar_hash: nar.info.narHash, nar_size: nar.info.narSize, references: [] }, nar: nar.nar,
  });
  t.equal(uploaded.status, 200, JSON.stringify(uploaded.body));
  const [stored] = await kiln.sql<{ file_hash: string; file_size: string }[]>`select file_hash, file_size from cached_paths where hash_part = ${nar.hash}`;
  const url = `${kiln.url}/cache/open/nar/${stored!.file_hash}.nar.zst`;
  const places = new SharedReadPlaces(kiln.nars.readPlaces.limit, kiln.nars.readPlaces.buffer);
  t.ok(places.tryTake(), 'the test holds the only read place');
  const answers = Array.from({ length: READERS }, () => fetchFresh(url));
  // Each reader waits, in a thread's line or the main thread's (which also listens on the port).
  await eventually(() => threadSum(kiln.root.inspect(), 'readsWaiting') + places.waiting === READERS, { message: 'every reader waits for the place' });
  t.ok(threadSum(kiln.root.inspect(), 'readsWaiting') > 0, 'threads hold waiting readers');
  const release = async (): Promise<string[]> => {
    places.give();
    return (await Promise.all(answers)).map((a) => `${a.status} ${a.status === 200 ? a.bytes.length : ''}`.trim());
  };
  return { kiln, token: owner.token, hash: nar.hash, url, size: Number(stored!.file_size), release };
}

t.test('a cache made private while its readers wait: 401, not the bytes', async (t) => {
  const w = await waitingReaders(t);
  const sentBefore = threadSum(w.kiln.root.inspect(), 'nars');
  t.equal((await w.kiln.api('PATCH', '/caches/open', { token: w.token, body: { public: false } })).status, 200);
  const answers = await w.release();
  t.same([...new Set(answers)], ['401'], 'every waiting reader is refused');
  t.equal(threadSum(w.kiln.root.inspect(), 'nars'), sentBefore, 'no thread sent the file');
  t.equal((await fetchFresh(w.url)).status, 401, 'and so is the next');
});

t.test('a path deleted while its readers wait: 404, not the bytes', async (t) => {
  const w = await waitingReaders(t);
  const sentBefore = threadSum(w.kiln.root.inspect(), 'nars');
  t.equal((await w.kiln.api('DELETE', `/caches/open/nars/${w.hash}`, { token: w.token })).status, 200);
  const answers = await w.release();
  t.same([...new Set(answers)], ['404'], 'every waiting reader is told it is gone');
  t.equal(threadSum(w.kiln.root.inspect(), 'nars'), sentBefore, 'no thread sent the file');
});

t.test('with no change while they wait, the waiting readers get the file', async (t) => {
  const w = await waitingReaders(t);
  const answers = await w.release();
  t.same([...new Set(answers)], [`200 ${w.size}`]);
});
