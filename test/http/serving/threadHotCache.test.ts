// A serving thread's hot narinfo memory (http/serving/threadHotCache.ts): cache names are
// case-insensitive, so every spelling of a cache is one entry, and an invalidation in any spelling
// reaches them all; a name outside the cache name pattern is never kept.
import t from 'tap';
import { ThreadHotCache } from '../../../http/serving/threadHotCache.js';

const FILE = '0123456789abcdfghijklmnpqrsvwxyz.narinfo';
const hit = { status: 200, contentType: 'text/x-nix-narinfo', xCache: 'HIT', body: Buffer.from('StorePath: /nix/store/x\n') };

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
