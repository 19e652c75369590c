import t from 'tap';
import { parseRange } from '../../../http/cache/byteRange.js';

t.test('Range headers', async (t) => {
  t.same(parseRange(undefined, 100), { kind: 'whole' });
  t.same(parseRange('bytes=0-9', 100), { kind: 'part', start: 0, end: 9 });
  t.same(parseRange('bytes=90-', 100), { kind: 'part', start: 90, end: 99 });
  t.same(parseRange('bytes=90-500', 100), { kind: 'part', start: 90, end: 99 }, 'an end past the file is cut');
  t.same(parseRange('bytes=-10', 100), { kind: 'part', start: 90, end: 99 }, 'suffix range');
  t.same(parseRange('bytes=-500', 100), { kind: 'part', start: 0, end: 99 });
  t.same(parseRange('bytes=100-', 100), { kind: 'unsatisfiable' });
  t.same(parseRange('bytes=-0', 100), { kind: 'unsatisfiable' });
  t.same(parseRange('bytes=0-1,5-6', 100), { kind: 'whole' }, 'several ranges are ignored');
  t.same(parseRange('bytes=5-2', 100), { kind: 'whole' }, 'an invalid range is ignored');
  t.same(parseRange('items=0-1', 100), { kind: 'whole' });
});
