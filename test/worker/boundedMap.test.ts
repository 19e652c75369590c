// worker/boundedMap.ts: StoreTrust's memos hold at most their capacity, the least recently used going first.
import t from 'tap';
import { BoundedMap } from '../../worker/boundedMap.js';

t.test('past its capacity the least recently used entry goes', async (t) => {
  const map = new BoundedMap<string, number>(3);
  map.set('a', 1);
  map.set('b', 2);
  map.set('c', 3);
  t.equal(map.get('a'), 1, 'a read makes a the most recently used');
  map.set('d', 4);
  t.equal(map.size, 3);
  t.notOk(map.has('b'), 'b, least recently used, went');
  t.same([...map].map(([k]) => k), ['c', 'a', 'd'], 'oldest first');
  map.set('c', 30);
  map.set('e', 5);
  t.same([...map], [['d', 4], ['c', 30], ['e', 5]], 'a write makes an entry the most recently used too');
  map.delete('c');
  t.equal(map.get('c'), undefined);
  t.throws(() => new BoundedMap(0), /at least one entry/);
});
