// A serving thread's memory of NAR files (http/serving/smallNarMemory.ts), small and medium alike:
// a file is kept only up to the memory's size limit and within its byte budget, the oldest going
// first when the budget is full.
import t from 'tap';
import { SmallNarMemory } from '../../../http/serving/smallNarMemory.js';

const file = (bytes: number, fill: number) => Buffer.alloc(bytes, fill);

t.test('files above the size limit or the budget are not kept', async (t) => {
  const memory = new SmallNarMemory(100, 250);
  t.ok(memory.keeps(100));
  t.notOk(memory.keeps(101));
  memory.keep('big', file(101, 1));
  t.equal(memory.get('big'), undefined);
  t.notOk(new SmallNarMemory(100, 0).keeps(1), 'a budget of 0 keeps nothing');
});

t.test('within the budget, oldest out', async (t) => {
  const memory = new SmallNarMemory(100, 250);
  memory.keep('a', file(100, 1));
  memory.keep('b', file(100, 2));
  t.ok(memory.get('a') && memory.get('b'), 'both fit');
  memory.keep('c', file(100, 3));
  t.equal(memory.get('a'), undefined, 'the oldest went');
  t.equal(memory.get('b')?.[0], 2);
  t.equal(memory.get('c')?.[0], 3);
  memory.keep('c', file(100, 9));
  t.equal(memory.get('c')?.[0], 3, 'kept once: the bytes under a file hash never change');
  memory.keep('d', file(50, 4));
  t.ok(memory.get('b') && memory.get('c') && memory.get('d'), '250 bytes: all three fit');
});
