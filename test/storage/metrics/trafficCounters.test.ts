// The per-file NAR fetch counts behind the cache board's top fetched paths (docs/metrics.md): one
// entry per cache, UTC day and file, at most 10,000 distinct files between two flushes (a flood of
// distinct files still counts in the minute totals, not per file), and a failed flush's counts put
// back into the next one.
import t from 'tap';
import { TrafficCounters } from '../../../storage/index.js';

t.test('per-file fetches: counted per day, bounded, restored after a failed flush', async (t) => {
  let now = Date.UTC(2026, 10, 26, 23, 59);
  const counters = new TrafficCounters(() => now);
  counters.served('c1', 100, 'f1');
  counters.served('c1', 100, 'f1');
  counters.served('c1', 50);
  now += 2 * 60_000; // the next UTC day
  counters.served('c1', 100, 'f1');
  const files = counters.takeFiles();
  t.same(files.map((f) => [f.day.toISOString().slice(0, 10), f.fileHash, f.fetches, f.bytes]), [['2026-11-26', 'f1', 2, 200], ['2026-11-27', 'f1', 1, 100]]);
  t.same(counters.take().reduce((n, m) => n + m.narBytesServed, 0), 350, 'every byte in the minute totals, a fetch without a file too');
  t.same(counters.takeFiles(), [], 'taken once');

  counters.restoreFiles(files);
  counters.served('c1', 100, 'f1');
  t.same(counters.takeFiles().map((f) => f.fetches), [2, 2], 'a failed flush\'s counts come back and add up');
  counters.take();

  for (let i = 0; i < 10_005; i++) counters.served('c1', 1, `file-${i}`);
  counters.served('c1', 1, 'file-0');
  const flood = counters.takeFiles();
  t.equal(flood.length, 10_000, 'at most 10,000 distinct files per flush');
  t.equal(flood.find((f) => f.fileHash === 'file-0')?.fetches, 2, 'a file already counted still counts');
  t.equal(counters.take().reduce((n, m) => n + m.narBytesServed, 0), 10_006, 'the totals miss nothing');
});
