// A serving thread's memories of NAR files (http/serving/narMemory.ts): a file is kept only up to
// the memory's size limit and within its byte budget, into room reserved before its read; small
// files go oldest first when the budget is full, medium ones only once idle; neither lets go of a
// file with a send in flight (a full memory of files in use streams new files instead of trading
// them in, which would read every request into a new buffer, or leave evicted buffers to slow readers).
import t from 'tap';
import { MEDIUM_NAR_MIN_BYTES, NarMemory, type NarMemoryOptions } from '../../../http/serving/narMemory.js';

const file = (bytes: number, fill: number) => Buffer.alloc(bytes, fill);
const small = (maxFileBytes: number, budget: number) => new NarMemory({ minFileBytes: 0, maxFileBytes, budget, idleMs: 0 });
const medium = (maxFileBytes: number, budget: number, more: Partial<NarMemoryOptions> = {}) =>
  new NarMemory({ minFileBytes: MEDIUM_NAR_MIN_BYTES, maxFileBytes, budget, idleMs: 60_000, ...more });
/** A read to keep: room reserved, then its bytes kept; the bytes to send come back. */
const read = (memory: NarMemory, hash: string, bytes: Buffer): Buffer | null => (memory.reserve(bytes.length) ? memory.keep(hash, bytes) : null);

t.test('files above the size limit or the budget are not kept', async (t) => {
  const memory = small(100, 250);
  t.ok(memory.holds(100));
  t.notOk(memory.holds(101));
  t.equal(read(memory, 'big', file(101, 1)), null);
  t.equal(memory.get('big'), undefined);
  t.notOk(small(100, 0).holds(1), 'a budget of 0 keeps nothing');
});

t.test('small files: within the budget, oldest out, but not while a send of it is in flight', async (t) => {
  const memory = small(100, 250);
  read(memory, 'a', file(100, 1));
  read(memory, 'b', file(100, 2));
  t.ok(memory.get('a') && memory.get('b'), 'both fit');
  read(memory, 'c', file(100, 3));
  t.equal(memory.get('a'), undefined, 'the oldest went');
  t.equal(memory.get('b')?.[0], 2);
  t.equal(memory.get('c')?.[0], 3);
  t.ok(memory.reserve(50));
  const twice = memory.keep('c', file(50, 9));
  t.equal(twice[0], 3, 'kept once: a second read of it sends the kept bytes (the bytes under a file hash never change)');
  t.equal(memory.bytes, 200, 'the second read\'s room given back');
  const bSent = memory.sending('b'); // a slow reader of b (which makes b the newest)
  t.equal(read(memory, 'd', file(100, 4))?.[0], 4, 'room for d: c goes');
  t.ok(memory.get('b'), 'b, being sent, stays');
  t.equal(memory.get('c'), undefined);
  const dSent = memory.sending('d');
  t.equal(read(memory, 'e', file(100, 5)), null, 'every file in flight: no room, the new file is streamed');
  t.equal(memory.bytes, 200, 'never above the budget');
  bSent();
  t.equal(read(memory, 'e', file(100, 5))?.[0], 5, 'b\'s send ended: it goes for e');
  t.equal(memory.get('b'), undefined);
  dSent();
});

/** Medium sizes: at least MEDIUM_NAR_MIN_BYTES. */
const U = MEDIUM_NAR_MIN_BYTES;

t.test('medium files: only from MEDIUM_NAR_MIN_BYTES to the size limit, within the budget', async (t) => {
  const memory = medium(2 * U, 5 * U);
  t.notOk(memory.holds(U - 1), 'below the medium minimum (nar.smallBytes 0 does not send every file here)');
  t.ok(memory.holds(U));
  t.notOk(memory.holds(2 * U + 1), 'above the size limit');
  t.notOk(medium(2 * U, 0).reserve(U), 'a budget of 0 keeps nothing');
});

t.test('medium files: a read to keep reserves its room, so two misses cannot count the same room', async (t) => {
  const held: number[] = [];
  const memory = medium(2 * U, 5 * U, { idleMs: 1000, now: () => 0, report: (bytes) => held.push(bytes) });
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
  const memory = medium(2 * U, 5 * U, { idleMs: 1000, now: () => now });
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
