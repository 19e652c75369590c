// A serving thread's memories of NAR files (http/serving/smallNarMemory.ts, mediumNarMemory.ts):
// a file is kept only up to the memory's size limit and within its byte budget; small files go
// oldest first when the budget is full, medium ones only once idle (a full memory of files in use
// streams new files instead of trading them in, which would read every request into a new buffer).
import t from 'tap';
import { MediumNarMemory } from '../../../http/serving/mediumNarMemory.js';
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

t.test('medium files: a full memory keeps the files in use and streams new ones; an idle file makes room', async (t) => {
  let now = 0;
  const memory = new MediumNarMemory(100, 250, 1000, () => now);
  t.notOk(memory.keeps(101), 'above the size limit');
  memory.keep('a', file(100, 1));
  memory.keep('b', file(100, 2));
  t.ok(memory.keeps(50), 'room left');
  t.notOk(memory.keeps(100), 'full of files used within the idle time');
  memory.keep('c', file(100, 3));
  t.equal(memory.get('c'), undefined, 'not kept: no file in use goes for it');
  t.ok(memory.get('a') && memory.get('b'), 'the files in use stay');
  now = 600;
  memory.get('a'); // used again: b is now the least recently used
  now = 1200;
  t.ok(memory.keeps(100), 'b idle for 1,200 ms makes room');
  memory.keep('c', file(100, 3));
  t.equal(memory.get('b'), undefined, 'the idle file went');
  t.equal(memory.get('a')?.[0], 1, 'the file used since stays');
  t.equal(memory.get('c')?.[0], 3);
  t.notOk(new MediumNarMemory(100, 0).keeps(1), 'a budget of 0 keeps nothing');
});
