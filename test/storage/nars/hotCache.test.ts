import t from 'tap';
import { HotCache } from '../../../storage/index.js';

t.test('least recently used entries go first once the capacity is passed', async (t) => {
  const cache = new HotCache<string>(8 * 1000);
  cache.set('a', 'A', 500);
  cache.set('b', 'B', 500);
  t.equal(cache.get('a'), 'A', 'a is now the most recent');
  for (let i = 0; i < 12; i++) cache.set(`x${i}`, 'X', 500);
  t.ok(cache.bytes <= 8000, `stays within capacity (${cache.bytes})`);
  t.equal(cache.get('b'), undefined, 'the least recent went');
});

t.test('entries expire after their time to live; immutable ones do not', async (t) => {
  let now = 1000;
  const cache = new HotCache<string | null>(1 << 20, () => now);
  cache.set('miss', null, 0, 5000);
  cache.set('nar', 'bytes', 5);
  t.equal(cache.get('miss'), null, 'a remembered miss is null, not undefined');
  now += 5000;
  t.equal(cache.get('miss'), undefined, 'expired');
  t.equal(cache.get('nar'), 'bytes');
  t.equal(cache.size, 1);
});

t.test('values bigger than an eighth of the capacity are not kept; delete and deletePrefix forget', async (t) => {
  const cache = new HotCache<string>(8000);
  cache.set('big', 'x', 2000);
  t.equal(cache.get('big'), undefined);
  cache.set('i:c1:a', 'a', 10);
  cache.set('i:c1:b', 'b', 10);
  cache.set('i:c2:a', 'c', 10);
  cache.deletePrefix('i:c1:');
  t.equal(cache.get('i:c1:a'), undefined);
  t.equal(cache.get('i:c2:a'), 'c');
  cache.delete('i:c2:a');
  t.equal(cache.size, 0);
  t.equal(cache.bytes, 0);
});

t.test('peekEntry hands out an expired entry with its expiry, on the cache\'s clock, and keeps it until replaced', async (t) => {
  let now = 1000;
  const cache = new HotCache<string | null>(1 << 20, () => now);
  t.equal(cache.peekEntry('absent'), undefined);
  cache.set('miss', null, 0, 5000);
  t.match(cache.peekEntry('miss'), { value: null, expires: 6000 });
  now += 5000;
  t.equal(cache.time(), 6000, 'time() is the clock entries expire by');
  t.match(cache.peekEntry('miss'), { value: null, expires: 6000 }, 'expired, still there');
  t.match(cache.peekEntry('miss'), { value: null, expires: 6000 }, 'not dropped by looking');
  cache.set('miss', 'found', 5, 5000);
  t.match(cache.peekEntry('miss'), { value: 'found', expires: 11000 }, 'replaced by the fresh answer');
  now += 5000;
  t.equal(cache.get('miss'), undefined, 'get() does not serve it once expired');
  t.equal(cache.peekEntry('miss'), undefined, 'and drops it');
});
// How narinfo reads use peekEntry (serve the stale answer once more while one query refreshes it) is
// tested on the real module in narReads.test.ts.
