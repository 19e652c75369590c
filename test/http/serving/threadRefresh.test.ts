// A serving thread renews what its hot memory holds in the background (docs/http.md, "Serving
// threads"): an expired narinfo answer is served once more while the thread asks the main thread
// for the fresh one, by message (http/cache/narinfo.ts, anonymousNarinfo), and the cache's access
// word is renewed with it. So a miss every thread has learned keeps being answered from the
// threads' memory past its TTL (5 s) and past the access word's (5 s), with no request relayed;
// a thread whose refreshes went unanswered would relay again once REFRESH_WAIT_MS (5 s) ran out.
// The main thread answers a miss a thread still holds with 'miss' and the thread renews its entry
// (http/serving/narinfoRefreshes.ts); such a renewed miss is forgotten at once by an upload through
// this process, as a learned one is.
import { request as httpRequest } from 'node:http';
import t from 'tap';
import { startTestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { localNar, uploadChunked } from '../../support/narUploads.js';
import { buildFixturePaths } from '../../support/nixStore.js';
import { threadSum, type ActorNode } from '../../support/servingThreads.js';

/** Each GET on a connection of its own, so that they spread over the three listeners. */
function getFresh(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { agent: false, headers: { connection: 'close' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

t.test('threads renew a remembered miss by message, past its TTL, without relaying', async (t) => {
  const kiln = await startTestKiln(t, { 'http.threads': 2 });
  const owner = await signUp(kiln, 'owner');
  await createTestCache(kiln.sql, 'open', { public: true, ownerId: owner.id });
  const file = localNar(buildFixturePaths().file);
  const url = `${kiln.url}/cache/open/${file.hash}.narinfo`;

  // Every thread learns the miss: the first time a thread meets it, it relays it.
  for (let round = 0; round < 4; round++) {
    t.same(new Set(await Promise.all(Array.from({ length: 24 }, () => getFresh(url)))), new Set([404]));
  }
  const forwarded = threadSum(kiln.root.inspect(), 'forwarded');
  const fromMemory = threadSum(kiln.root.inspect(), 'fromMemory');
  t.ok(forwarded >= 2, 'each thread relayed the miss once');

  // Past the miss's TTL and the access word's, twice over: requests keep coming, so every thread
  // renews both in the background.
  const until = Date.now() + 12_000;
  while (Date.now() < until) {
    t.same(new Set(await Promise.all(Array.from({ length: 6 }, () => getFresh(url)))), new Set([404]), 'still a miss');
    await sleep(400);
  }
  t.equal(threadSum(kiln.root.inspect(), 'forwarded'), forwarded, 'no request relayed after the threads learned the miss');
  t.ok(threadSum(kiln.root.inspect(), 'fromMemory') > fromMemory, 'the threads answered from memory');

  // The renewed misses are the entries an upload must reach: every listener answers the path at
  // once. Requests keep coming while the upload runs (it may take seconds on a loaded machine), so
  // the threads still hold the miss, renewed, when it lands.
  let uploading = true;
  const asking = (async () => {
    while (uploading) {
      await Promise.all(Array.from({ length: 6 }, () => getFresh(url)));
      await sleep(200);
    }
  })();
  const uploaded = await uploadChunked(kiln, owner.token, 'open', file);
  uploading = false;
  await asking;
  t.equal(uploaded.status, 200);
  t.same(new Set(await Promise.all(Array.from({ length: 24 }, () => getFresh(url)))), new Set([200]), 'no thread serves its renewed miss after the upload');
});

t.test('an unknown cache\'s 404 is never learned: a name does not buy memory in the threads', async (t) => {
  const kiln = await startTestKiln(t, { 'http.threads': 2 });
  const hash = localNar(buildFixturePaths().file).hash;
  const before = { forwarded: threadSum(kiln.root.inspect(), 'forwarded'), fromMemory: threadSum(kiln.root.inspect(), 'fromMemory') };
  for (let round = 0; round < 3; round++) {
    // a new name each request, and the same name again: neither is kept
    t.same(new Set(await Promise.all(Array.from({ length: 12 }, (_, i) => getFresh(`${kiln.url}/cache/${i % 2 === 0 ? 'nosuch' : `nosuch-${round}-${i}`}/${hash}.narinfo`)))), new Set([404]));
  }
  t.equal(threadSum(kiln.root.inspect(), 'fromMemory'), before.fromMemory, 'no answer came from memory');
  t.equal(threadSum(kiln.root.inspect(), 'forwarded') - before.forwarded, 36, 'every request went to the main thread');
});
