// The push parser is fed views of one buffer its caller refills (the chunked upload's check pass
// reads every chunk into one reused buffer): nothing it keeps between pushes may be such a view.
// A kept entry name once was, and the next refill changed it under the sort check.
import t from 'tap';
import { isNarError, NarParser } from '../../../protocol/index.js';
import { directoryNar } from '../../support/narBytes.js';

/** Parses `nar` through one buffer of `size` bytes, refilled for every push; the error, if any. */
function parseThroughOneBuffer(nar: Buffer, size: number): string | null {
  const parser = new NarParser();
  const reused = Buffer.alloc(size);
  try {
    for (let at = 0; at < nar.length; at += size) {
      const n = nar.copy(reused, 0, at, Math.min(at + size, nar.length));
      parser.push(reused.subarray(0, n));
    }
    parser.end();
    return null;
  } catch (e) {
    if (isNarError(e)) return e.reason;
    throw e;
  }
}

const filler = Buffer.alloc(4096, 0x61);
for (const size of [8, 24, 1000, 5000]) {
  t.test(`pushed through one reused buffer of ${size} bytes`, async (t) => {
    t.equal(parseThroughOneBuffer(directoryNar([['a', filler], ['b', filler], ['c', Buffer.from('x')]]), size), null, 'sorted entries parse');
    t.match(parseThroughOneBuffer(directoryNar([['b', filler], ['a', filler]]), size), /entries not sorted/, 'unsorted entries are refused');
    t.match(parseThroughOneBuffer(directoryNar([['a', filler], ['a', filler]]), size), /duplicate entry/, 'a repeated entry is refused');
  });
}
