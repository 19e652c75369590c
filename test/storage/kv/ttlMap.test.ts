import t from 'tap';
import { TtlMap } from '../../../storage/index.js';

/** A clock the test moves by hand. */
const manualClock = () => {
  let time = 1_000;
  return { now: () => time, advance: (ms: number) => void (time += ms) };
};

t.test('an entry lives for its own time to live, and not a millisecond longer', async (t) => {
  const clock = manualClock();
  const map = new TtlMap<string>(10, clock.now);
  map.set('short', 'a', 100);
  map.set('long', 'b', 1_000);
  clock.advance(99);
  t.equal(map.get('short'), 'a');
  clock.advance(1);
  t.equal(map.get('short'), undefined, 'gone at its expiry time');
  t.equal(map.get('long'), 'b');
  t.equal(map.get('never'), undefined);
});

t.test('a stored null is remembered as null, told apart from "not known"', async (t) => {
  const map = new TtlMap<string | null>(10, manualClock().now);
  map.set('miss', null, 100);
  t.equal(map.get('miss'), null);
  t.equal(map.get('other'), undefined);
});

t.test('set again renews the value and its expiry', async (t) => {
  const clock = manualClock();
  const map = new TtlMap<number>(10, clock.now);
  map.set('k', 1, 100);
  clock.advance(90);
  map.set('k', 2, 100);
  clock.advance(90);
  t.equal(map.get('k'), 2);
});

t.test('peek hands out an expired value, marked stale, until it is replaced or deleted', async (t) => {
  const clock = manualClock();
  const map = new TtlMap<string>(10, clock.now);
  map.set('k', 'old', 100);
  t.same(map.peek('k'), { value: 'old', fresh: true });
  clock.advance(100);
  t.equal(map.get('k'), undefined);
  t.same(map.peek('k'), { value: 'old', fresh: false }, 'get() of an expired entry does not drop it');
  map.delete('k');
  t.equal(map.peek('k'), undefined);
});

t.test('when full, expired entries go first, then the oldest written', async (t) => {
  const clock = manualClock();
  const map = new TtlMap<string>(3, clock.now);
  map.set('a', 'a', 1_000);
  map.set('b', 'b', 10);
  map.set('c', 'c', 1_000);
  clock.advance(10);
  map.set('d', 'd', 1_000);
  t.same(['a', 'b', 'c', 'd'].map((k) => map.peek(k)?.value), ['a', undefined, 'c', 'd'], 'the expired one made room');
  map.set('e', 'e', 1_000);
  t.equal(map.size, 3);
  t.same(['a', 'c', 'd', 'e'].map((k) => map.get(k)), [undefined, 'c', 'd', 'e'], 'a live map drops its oldest entry');
});

t.test('writing a key again makes it the newest', async (t) => {
  const map = new TtlMap<number>(3, manualClock().now);
  map.set('x', 1, 1_000);
  map.set('y', 1, 1_000);
  map.set('x', 2, 1_000);
  map.set('z', 1, 1_000);
  map.set('w', 1, 1_000);
  t.same(['x', 'y', 'z', 'w'].map((k) => map.get(k)), [2, undefined, 1, 1], 'y, not the rewritten x, was the oldest');
});

t.test('deletePrefix and clear forget what they name', async (t) => {
  const map = new TtlMap<number>(10, manualClock().now);
  map.set('cache1/x', 1, 100);
  map.set('cache1/y', 2, 100);
  map.set('cache10/x', 3, 100);
  map.deletePrefix('cache1/');
  t.same([map.get('cache1/x'), map.get('cache1/y'), map.get('cache10/x')], [undefined, undefined, 3]);
  map.clear();
  t.equal(map.size, 0);
});
