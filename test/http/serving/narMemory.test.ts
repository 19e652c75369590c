// A serving thread's memories of NAR files (http/serving/smallNarMemory.ts, mediumNarMemory.ts):
// a file is kept only up to the memory's size limit and within its byte budget; small files go
// oldest first when the budget is full, medium ones only once idle (a full memory of files in use
// streams new files instead of trading them in, which would read every request into a new buffer).
import t from 'tap';
import { MEDIUM_NAR_MIN_BYTES, MediumNarMemory } from '../../../http/serving/mediumNarMemory.js';
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

/** Medium sizes: at least MEDIUM_NAR_MIN_BYTES. */
const U = MEDIUM_NAR_MIN_BYTES;

t.test('medium files: only from MEDIUM_NAR_MIN_BYTES to the size limit, within the budget', async (t) => {
  const memory = new MediumNarMemory(2 * U, 5 * U);
  t.notOk(memory.holds(U - 1), 'below the medium minimum (nar.smallBytes 0 does not send every file here)');
  t.ok(memory.holds(U));
  t.notOk(memory.holds(2 * U + 1), 'above the size limit');
  t.notOk(new MediumNarMemory(2 * U, 0).reserve(U), 'a budget of 0 keeps nothing');
});

t.test('medium files: a read to keep reserves its room, so two misses cannot count the same room', async (t) => {
  const held: number[] = [];
  const memory = new MediumNarMemory(2 * U, 5 * U, 1000, () => 0, (bytes) => held.push(bytes));
  t.ok(memory.reserve(2 * U));
  t.ok(memory.reserve(2 * U));
  t.notOk(memory.reserve(2 * U), 'the third miss finds the room taken by the two reads under way: it streams');
  t.equal(memory.bytes, 4 * U, 'reads under way count');
  memory.keep('a', file(2 * U, 1));
  memory.release(2 * U); // the second read failed
  t.equal(memory.bytes, 2 * U);
  t.equal(memory.get('a')?.[0], 1);
  t.same(held, [2 * U, 4 * U, 4 * U, 2 * U], 'every change reported (the thread\'s counter)');
});

t.test('medium files: a file leaves only idle and with no send in flight; a lookup alone does not keep it', async (t) => {
  let now = 0;
  const memory = new MediumNarMemory(2 * U, 5 * U, 1000, () => now);
  for (const [hash, fill] of [['a', 1], ['b', 2]] as const) {
    t.ok(memory.reserve(2 * U));
    memory.keep(hash, file(2 * U, fill));
  }
  const aSent = memory.sending('a'); // a slow reader begins at 0
  t.notOk(memory.reserve(2 * U), 'full of files used within the idle time');
  now = 600;
  t.ok(memory.get('b'), 'looked up (a request that then fell through)...');
  now = 1200;
  t.ok(memory.reserve(2 * U), '...does not keep b in: idle for 1,200 ms, it makes room');
  t.equal(memory.get('b'), undefined, 'the idle file went');
  t.ok(memory.get('a'), 'the file a slow reader is being sent stays, though idle since its send began');
  memory.keep('c', file(2 * U, 3));
  now = 10_000;
  t.ok(memory.reserve(2 * U), 'c, idle and not being sent, makes room');
  t.equal(memory.get('c'), undefined);
  t.ok(memory.get('a'), 'a, being sent since 0, stays');
  t.equal(memory.bytes, 4 * U, 'the held bytes stay counted: never above the budget');
  t.notOk(memory.reserve(2 * U), 'no room left: the file being sent does not go for a new one');
  aSent();
  aSent(); // twice: once counted
  now = 10_500;
  memory.keep('d', file(2 * U, 4));
  t.notOk(memory.reserve(2 * U), 'a was in use until its send ended, 500 ms ago');
  now = 11_001;
  t.ok(memory.reserve(2 * U), 'idle since its send ended, a goes');
  t.equal(memory.get('a'), undefined);
  t.ok(memory.get('d'), 'd, used within the idle time, stays');
  t.equal(memory.bytes, 5 * U - U, 'd and the read under way');
});
