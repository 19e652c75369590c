// A serving thread's hot narinfo memory (http/serving/threadHotCache.ts): cache names are
// case-insensitive, so every spelling of a cache is one entry, and an invalidation in any spelling
// reaches them all; a name outside the cache name pattern is never kept. Expired answers are
// served once more while one refresh runs; the access word is never served past its TTL. A kept
// body holds no more memory than its bytes. A renewal (the main thread's 'still a miss') restarts
// the held entry's life, never across an invalidation.
import t from 'tap';
import { ACCESS_TTL_MS, HIT_TTL_MS, MISS_TTL_MS, NAR_SERVED_EVERY_MS, narinfoNarFile, REFRESH_WAIT_MS, ThreadHotCache, type HotAnswer, type Refresh } from '../../../http/serving/threadHotCache.js';

const FILE = '0123456789abcdfghijklmnpqrsvwxyz.narinfo';
const OTHER = 'zyxwvsrqpnmlkjihgfdcba9876543210.narinfo';
const hit = { status: 200, contentType: 'text/x-nix-narinfo', xCache: 'HIT', body: Buffer.from('StorePath: /nix/store/x\n') };
const miss = { status: 404, contentType: 'application/json', xCache: null, body: Buffer.from('{"error":true}') };

t.test('one entry for every spelling of a cache', async (t) => {
  const hot = new ThreadHotCache(1 << 20, () => 1_000);
  hot.learn(hot.generation, 'Pub', FILE, hit);
  for (const spelling of ['Pub', 'pub', 'PUB', 'pUb']) t.equal(hot.get(spelling, FILE)?.status, 200, `${spelling} is the cache learned as Pub`);
});

t.test('an access change in any spelling forgets every spelling', async (t) => {
  for (const [learned, changed] of [['PUB', 'pub'], ['pub', 'PUB'], ['Pub', 'pUB']] as const) {
    const hot = new ThreadHotCache(1 << 20, () => 1_000);
    hot.learn(hot.generation, learned, FILE, hit);
    hot.learn(hot.generation, learned.toLowerCase(), FILE, hit);
    hot.forgetCache(changed);
    for (const spelling of [learned, learned.toLowerCase(), learned.toUpperCase(), changed]) {
      t.equal(hot.get(spelling, FILE), undefined, `learned as ${learned}, changed as ${changed}: ${spelling} is forgotten`);
    }
  }
});

t.test('a path forgotten is forgotten in every spelling', async (t) => {
  const hot = new ThreadHotCache(1 << 20, () => 1_000);
  hot.learn(hot.generation, 'PUB', FILE, hit);
  hot.forgetPath(FILE.slice(0, 32));
  t.equal(hot.get('pub', FILE), undefined);
  t.equal(hot.get('PUB', FILE), undefined);
});

t.test('a name outside the cache name pattern is never kept', async (t) => {
  const hot = new ThreadHotCache(1 << 20, () => 1_000);
  // U+212A KELVIN SIGN lower-cases to "k" in JavaScript; PostgreSQL's citext may see it otherwise.
  for (const name of ['\u212Aache', 'pub%20', '.pub', '']) {
    hot.learn(hot.generation, name, FILE, hit);
    t.equal(hot.get(name, FILE), undefined, JSON.stringify(name));
  }
  t.equal(hot.get('kache', FILE), undefined, 'nor reached by its JavaScript lower case');
});

t.test('access is trusted only for its TTL, whatever the spelling', async (t) => {
  let now = 1_000;
  const hot = new ThreadHotCache(1 << 20, () => now);
  hot.learn(hot.generation, 'pub', FILE, hit);
  now += 5_001;
  t.equal(hot.get('PUB', FILE), undefined);
});

/** A memory on a clock the test moves, and the refreshes it asked for. */
function clocked() {
  const clock = { now: 1_000 };
  const hot = new ThreadHotCache(1 << 20, () => clock.now);
  const asked: string[] = [];
  const refresh = (cache: string, file: string) => {
    asked.push(`${cache}/${file}`);
  };
  return { clock, hot, asked, refresh };
}

t.test('an expired answer is served once more while one refresh asks the main thread', async (t) => {
  const { clock, hot, asked, refresh } = clocked();
  hot.learn(hot.generation, 'pub', FILE, miss);
  clock.now += MISS_TTL_MS; // expired; the access word (learned at the same time) is as old, within its TTL
  t.equal(hot.get('PUB', FILE, refresh)?.status, 404, 'the expired miss once more');
  t.equal(hot.get('pub', FILE, refresh)?.status, 404, 'and while its refresh is under way');
  t.same(asked, [`pub/${FILE}`], 'one refresh, however many requests');
  // The refresh's answer: the path was uploaded meanwhile (by another process).
  hot.learn(hot.generation, 'pub', FILE, hit);
  t.equal(hot.get('pub', FILE, refresh)?.status, 200, 'the refreshed answer');
  t.equal(asked.length, 1);
  const plain = clocked();
  plain.hot.learn(plain.hot.generation, 'pub', FILE, miss);
  plain.clock.now += MISS_TTL_MS;
  t.equal(plain.hot.get('pub', FILE), undefined, 'without a way to refresh, an expired answer is not served');
});

t.test('a refresh that does not come back in time: the expired answer goes to the main thread', async (t) => {
  const { clock, hot, asked, refresh } = clocked();
  hot.learn(hot.generation, 'pub', FILE, hit);
  clock.now += HIT_TTL_MS;
  hot.learn(hot.generation, 'pub', OTHER, hit); // the access word is fresh
  t.ok(hot.get('pub', FILE, refresh), 'the expired hit once more');
  clock.now += REFRESH_WAIT_MS;
  hot.learn(hot.generation, 'pub', OTHER, hit);
  t.equal(hot.get('pub', FILE, refresh), undefined, 'its refresh given up: relayed');
  t.equal(asked.length, 1);
});

t.test('the access word is renewed before it lapses, and never served past its TTL', async (t) => {
  const { clock, hot, asked, refresh } = clocked();
  hot.learn(hot.generation, 'pub', FILE, hit);
  clock.now += ACCESS_TTL_MS / 2 - 1;
  hot.get('pub', FILE, refresh);
  t.same(asked, [], 'a fresh word: no refresh');
  clock.now += 2;
  hot.get('pub', FILE, refresh);
  hot.get('pub', FILE, refresh);
  t.same(asked, [`pub/${FILE}`], 'half its TTL old: one refresh');
  clock.now = 1_000 + ACCESS_TTL_MS + 1;
  t.equal(hot.get('pub', FILE, refresh), undefined, 'an unanswered refresh does not extend the word');
});

t.test('a refresh the main thread refuses drops the entry and the access word', async (t) => {
  const { clock, hot, refresh } = clocked();
  hot.learn(hot.generation, 'pub', FILE, hit);
  clock.now += HIT_TTL_MS;
  hot.learn(hot.generation, 'pub', OTHER, hit);
  t.ok(hot.get('pub', FILE, refresh), 'the expired hit, its refresh under way');
  hot.refreshFailed('pub', FILE, true); // e.g. 401: the cache was made private by another process
  t.equal(hot.get('pub', FILE, refresh), undefined);
  t.equal(hot.get('pub', OTHER, refresh), undefined, 'nothing of the cache is served until the main thread answers again');
});

t.test('a refresh that predates an invalidation asks again', async (t) => {
  const { clock, hot, asked, refresh } = clocked();
  hot.learn(hot.generation, 'pub', FILE, miss);
  clock.now += MISS_TTL_MS;
  const generation = hot.generation;
  hot.get('pub', FILE, refresh);
  hot.forgetPath(OTHER.slice(0, 32));
  hot.learn(generation, 'pub', FILE, hit);
  t.equal(hot.get('pub', FILE, refresh)?.status, 404, 'not learned: the stale miss while its refresh is counted under way');
  hot.refreshFailed('pub', FILE, false);
  hot.get('pub', FILE, refresh);
  t.equal(asked.length, 2, 'asked again');
});

t.test('a body that views a larger block is kept in a buffer of its own size', async (t) => {
  const hot = new ThreadHotCache(1 << 20, () => 1_000);
  // A short Buffer.from of text is a view of Node's shared 8 KiB pool; kept as is, it holds the pool's block.
  const pooled = Buffer.from('StorePath: /nix/store/y\n');
  t.ok(pooled.buffer.byteLength > pooled.length, 'the test body is a view of a larger block');
  hot.learn(hot.generation, 'pub', FILE, { ...hit, body: pooled });
  const kept = hot.get('pub', FILE)!.body;
  t.equal(kept.toString(), pooled.toString(), 'the same bytes');
  t.equal(kept.buffer.byteLength, pooled.length, 'holding no more than the body');
  // A block of exactly the body (a refresh's message copy) is kept without another copy.
  const own = Buffer.from(new Uint8Array(Buffer.from('StorePath: /nix/store/z\n')).buffer);
  hot.learn(hot.generation, 'pub', OTHER, { ...hit, body: own });
  t.equal(hot.get('pub', OTHER)!.body, own);
});

t.test('an invalidation reaches every spelling already met', async (t) => {
  // Spellings met in requests lead straight to their cache's memory: it must be the one the
  // invalidation resets, whatever spelling each names.
  const hot = new ThreadHotCache(1 << 20, () => 1_000);
  hot.learn(hot.generation, 'pub', FILE, hit);
  for (const spelling of ['Pub', 'PUB', 'pub']) t.equal(hot.get(spelling, FILE)?.status, 200, `${spelling} met`);
  hot.forgetCache('pUB');
  for (const spelling of ['Pub', 'PUB', 'pub']) t.equal(hot.get(spelling, FILE), undefined, `${spelling} forgotten`);
  hot.learn(hot.generation, 'PUB', OTHER, miss);
  t.equal(hot.get('Pub', FILE), undefined, 'learning another file does not bring back the forgotten one');
  t.equal(hot.get('Pub', OTHER)?.status, 404, 'the memory answers again after the main thread did');
  hot.forgetPath(OTHER.slice(0, 32));
  for (const spelling of ['Pub', 'PUB', 'pub']) t.equal(hot.get(spelling, OTHER), undefined, `the path forgotten under ${spelling}`);
});

t.test('a renewal restarts the life of the answer held, unless an invalidation came since the ask', async (t) => {
  const { clock, hot, asked } = clocked();
  const held: HotAnswer[] = [];
  const refresh: Refresh = (cache, file, answer) => {
    asked.push(`${cache}/${file}`);
    held.push(answer);
  };
  hot.learn(hot.generation, 'pub', FILE, miss);
  hot.learn(hot.generation, 'pub', OTHER, miss);
  clock.now += MISS_TTL_MS;
  const generation = hot.generation;
  const body = hot.get('pub', FILE, refresh)!.body;
  hot.get('pub', OTHER, refresh);
  t.same(asked, [`pub/${FILE}`, `pub/${OTHER}`], 'both expired: both asked for');
  t.ok(hot.renew(generation, held[0]!), 'renewed');
  clock.now += ACCESS_TTL_MS / 2 - 1; // within the renewed life (at least 3/4 of MISS_TTL_MS) and the renewed access word's first half
  t.equal(hot.get('pub', FILE, refresh)?.body, body, 'the same body, for a new life');
  t.equal(asked.length, 2, 'not expired, the access word renewed too: no other refresh');

  hot.forgetPath('0'.repeat(32)); // an upload of another path through this process
  t.notOk(hot.renew(generation, held[1]!), 'an ask older than an invalidation renews nothing');
  hot.refreshFailed('pub', OTHER, false); // what the thread does then (narinfoRefreshes.ts)
  hot.get('pub', OTHER, refresh);
  t.equal(asked.length, 3, 'the next request asks again');
  hot.learn(hot.generation, 'pub', FILE, hit);
  const replaced = hot.get('pub', FILE)!;
  t.notOk(hot.renew(hot.generation, held[0]!), 'nor does an answer for an entry replaced since');
  t.equal(hot.get('pub', FILE), replaced);
});

t.test('oldest out across caches when the memory is full', async (t) => {
  const entry = hit.body.length + FILE.length;
  const hot = new ThreadHotCache(entry * 2, () => 1_000);
  hot.learn(hot.generation, 'one', FILE, hit);
  hot.learn(hot.generation, 'two', FILE, hit);
  hot.learn(hot.generation, 'one', OTHER, hit);
  t.equal(hot.get('one', FILE), undefined, 'the oldest went');
  t.equal(hot.get('two', FILE)?.status, 200);
  t.equal(hot.get('one', OTHER)?.status, 200);
});

t.test('a hit naming a NAR tells narServed, at most once per NAR_SERVED_EVERY_MS per entry', async (t) => {
  const narFile = 'a'.repeat(52);
  const named = { ...hit, body: Buffer.from(`StorePath: /nix/store/x\nURL: nar/${narFile}.nar.zst\nCompression: zstd\n`) };
  let now = 1_000;
  const heard: string[] = [];
  const hot = new ThreadHotCache(1 << 20, () => now, (cache, fileHash) => heard.push(`${cache}/${fileHash}`));
  hot.learn(hot.generation, 'Pub', FILE, named);
  hot.learn(hot.generation, 'pub', OTHER, hit);
  hot.learn(hot.generation, 'pub', 'abcdfghijklmnpqrsvwxyz0123456789.narinfo', { ...miss, body: Buffer.from(`URL: nar/${narFile}.nar.zst`) });
  t.equal(hot.get('PUB', FILE)?.narFile, narFile, 'the URL line read once, when learned');
  t.same(heard, [`pub/${narFile}`], 'by the lower-cased name');
  hot.get('pub', FILE);
  hot.get('pub', OTHER);
  hot.get('pub', 'abcdfghijklmnpqrsvwxyz0123456789.narinfo');
  t.same(heard, [`pub/${narFile}`], 'not again before NAR_SERVED_EVERY_MS; never for a hit without a NAR URL, nor a miss');
  now += NAR_SERVED_EVERY_MS;
  hot.get('pub', FILE);
  t.equal(heard.length, 2, 'again after it');
});

t.test('only a stored NAR name is read from a URL line', async (t) => {
  const at = (url: string) => narinfoNarFile(Buffer.from(`StorePath: /nix/store/x\nURL: ${url}\n`));
  t.equal(at(`nar/${'0'.repeat(52)}.nar.zst`), '0'.repeat(52));
  t.equal(at(`nar/${'0'.repeat(52)}.nar.xz`), null);
  t.equal(at(`nar/${'0'.repeat(51)}.nar.zst`), null);
  t.equal(at(`https://elsewhere/nar/${'0'.repeat(52)}.nar.zst`), null);
  t.equal(narinfoNarFile(Buffer.from('StorePath: /nix/store/x\n')), null);
});
