// With serving threads (http.threads 2; docs/http.md, "Serving threads"), the binary cache's access
// decisions are exactly those of one event loop (the authorization matrix,
// test/http/authorizationMatrixBinaryCache.test.ts): a private cache answers 401 to anonymous
// readers and hides itself (404 "no cache") from strangers whether the path or file exists or
// not, so no listener's memory tells a miss from a hit; a public cache made private stops being
// answered from any thread's memory. Small NAR files a thread keeps in memory are answered as the
// route answers them, and only under a live grant. And a miss every thread has learned turns into
// a hit on every listener once the path is uploaded.
import { request as httpRequest } from 'node:http';
import t from 'tap';
import { startTestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { buildFixturePaths } from '../../support/nixStore.js';
import { localNar, uploadChunked } from '../../support/narUploads.js';
import { fetchFresh, threadSum, type ActorNode } from '../../support/servingThreads.js';

/** Requests per cell: each on a connection of its own, so that they spread over the three listeners. */
const SPREAD = 24;

type Outcome = number | 'hidden' | 'absent';

/** One GET on a connection of its own; a 404 told apart as the matrix does (no such cache, or no such thing in it). */
function getFresh(url: string, secret?: string): Promise<Outcome> {
  const headers: Record<string, string> = { connection: 'close' };
  if (secret !== undefined) headers['authorization'] = `Basic ${Buffer.from(`nix:${secret}`).toString('base64')}`;
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { agent: false, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        if (res.statusCode !== 404) return resolve(res.statusCode ?? 0);
        resolve(Buffer.concat(chunks).toString().includes('"no cache \\"') ? 'hidden' : 'absent');
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}



/** The set of outcomes of SPREAD fresh GETs, twice: the second round meets what the first taught each thread. */
async function outcomes(url: string, secret?: string): Promise<Outcome[]> {
  const seen = new Set<Outcome>();
  for (let round = 0; round < 2; round++) {
    for (const o of await Promise.all(Array.from({ length: SPREAD }, () => getFresh(url, secret)))) seen.add(o);
  }
  return [...seen];
}

t.test('binary cache access with serving threads', async (t) => {
  const fixtures = buildFixturePaths();
  const [tree, file] = [localNar(fixtures.tree), localNar(fixtures.file)];
  const kiln = await startTestKiln(t, { 'http.threads': 2 });
  t.ok(kiln.servingThreads, 'threads started');
  await signUp(kiln, 'root');
  const owner = await signUp(kiln, 'owner');
  const stranger = await signUp(kiln, 'stranger');
  await createTestCache(kiln.sql, 'vault', { ownerId: owner.id });
  await createTestCache(kiln.sql, 'open', { public: true, ownerId: owner.id });
  for (const cache of ['vault', 'open']) t.equal((await uploadChunked(kiln, owner.token, cache, tree)).status, 200, `uploaded to ${cache}`);
  const [stored] = await kiln.sql<{ file_hash: string }[]>`select file_hash from cached_paths where hash_part = ${tree.hash}`;
  const paths = {
    'narinfo present': `${tree.hash}.narinfo`,
    'narinfo missing': `${file.hash}.narinfo`,
    'NAR present': `nar/${stored!.file_hash}.nar.zst`,
    'NAR missing': `nar/${'0'.repeat(52)}.nar.zst`,
  };
  const present = (what: string) => what.endsWith('present');

  t.test('a private cache: 401 to anonymous readers, hidden from strangers, whether the thing exists or not', async (t) => {
    for (const [what, path] of Object.entries(paths)) {
      const url = `${kiln.url}/cache/vault/${path}`;
      t.same(await outcomes(url), [401], `anonymous, ${what}`);
      t.same(await outcomes(url, stranger.token), ['hidden'], `stranger, ${what}`);
      t.same(await outcomes(url, owner.token), [present(what) ? 200 : 'absent'], `owner, ${what}`);
    }
  });

  t.test('a public cache made private: no thread answers it from memory', async (t) => {
    for (const [what, path] of Object.entries(paths)) {
      t.same(await outcomes(`${kiln.url}/cache/open/${path}`), [present(what) ? 200 : 'absent'], `public: anonymous, ${what}`);
    }
    t.equal((await kiln.api('PATCH', '/caches/open', { token: owner.token, body: { public: false } })).status, 200);
    for (const [what, path] of Object.entries(paths)) {
      for (const spelling of ['open', 'OPEN']) {
        const url = `${kiln.url}/cache/${spelling}/${path}`;
        t.same(await outcomes(url), [401], `made private (${spelling}): anonymous, ${what}`);
        t.same(await outcomes(url, stranger.token), ['hidden'], `made private (${spelling}): stranger, ${what}`);
      }
    }
    t.equal((await kiln.api('PATCH', '/caches/open', { token: owner.token, body: { public: true } })).status, 200);
  });

  t.test('small NAR files from a thread\'s memory: the same answers, only under a live grant', async (t) => {
    const nar = `${kiln.url}/cache/open/${paths['NAR present']}`;
    const basic = { authorization: `Basic ${Buffer.from(`nix:${owner.token}`).toString('base64')}` };
    const reference = await fetchFresh(nar, basic); // with credentials: the main thread's route
    t.equal(reference.status, 200);
    const before = threadSum(kiln.root.inspect(), 'narsFromMemory');
    for (let round = 0; round < 2; round++) {
      const answers = await Promise.all(Array.from({ length: SPREAD }, () => fetchFresh(nar)));
      t.same(new Set(answers.map((a) => `${a.status} ${a.type} ${a.cacheControl}`)), new Set([`200 ${reference.type} ${reference.cacheControl}`]), `round ${round}: answered as the route does`);
      t.ok(answers.every((a) => a.bytes.equals(reference.bytes)), `round ${round}: the same bytes`);
    }
    t.ok(threadSum(kiln.root.inspect(), 'narsFromMemory') > before, 'threads answered from memory');
    const range = { range: 'bytes=10-99' };
    const parts = await Promise.all(Array.from({ length: SPREAD }, () => fetchFresh(nar, range)));
    t.same(new Set(parts.map((a) => `${a.status} ${a.contentRange}`)), new Set([`206 bytes 10-99/${reference.bytes.length}`]));
    t.ok(parts.every((a) => a.bytes.equals(reference.bytes.subarray(10, 100))), 'a range of the kept bytes');
    t.equal((await kiln.api('PATCH', '/caches/open', { token: owner.token, body: { public: false } })).status, 200);
    t.same(await outcomes(nar), [401], 'made private: no thread answers from memory');
    t.equal((await kiln.api('PATCH', '/caches/open', { token: owner.token, body: { public: true } })).status, 200);
    t.same(await outcomes(nar), [200]);
    t.equal((await kiln.api('DELETE', `/caches/open/nars/${tree.hash}`, { token: owner.token })).status, 200);
    t.same(await outcomes(nar), ['absent'], 'its path deleted: no thread answers from memory');
  });

  t.test('an upload makes a miss every thread remembers a hit on every listener', async (t) => {
    const url = `${kiln.url}/cache/open/${file.hash}.narinfo`;
    t.same(await outcomes(url), ['absent'], 'a miss, learned by every thread');
    t.equal((await uploadChunked(kiln, owner.token, 'open', file)).status, 200);
    t.same(await outcomes(url), [200], 'no listener answers its remembered miss');
  });
});
