// A serving thread's line for storage read places (storage/nars/threadReadLine.ts) on the count it
// shares with the main thread and the other threads (sharedReadPlaces.ts): two lines on one shared
// buffer stand for two threads.
import t from 'tap';
import { SharedReadPlaces } from '../../../storage/nars/sharedReadPlaces.js';
import { ThreadReadLine, type PlaceOutcome } from '../../../storage/nars/threadReadLine.js';

/** A line on `places` whose safety net never fires within a test: only a wake-up moves it. */
function lineOn(places: SharedReadPlaces, openTimeoutSecs = 3600): { line: ThreadReadLine; held: () => number; toMain: () => number } {
  let held = 0;
  let toMain = 0;
  const line = new ThreadReadLine({ places, openTimeoutSecs, held: (change) => (held += change), mainWaits: () => toMain++, recheckMs: 3_600_000 });
  return { line, held: () => held, toMain: () => toMain };
}

const settled = (p: Promise<PlaceOutcome>): Promise<PlaceOutcome | 'pending'> => Promise.race([p, new Promise<'pending'>((resolve) => setImmediate(() => resolve('pending')))]);

t.test('in arrival order; a place given back passes straight to the next waiter', async (t) => {
  const places = new SharedReadPlaces(1);
  const { line, held } = lineOn(places);
  t.equal(await line.take(new AbortController().signal), 'held');
  const first = line.take(new AbortController().signal);
  const second = line.take(new AbortController().signal);
  t.equal(line.waiting, 2);
  line.give();
  t.equal(await first, 'held', 'the first waiter');
  t.equal(await settled(second), 'pending', 'the second still waits');
  line.give();
  t.equal(await second, 'held');
  t.equal(places.active, 1, 'the place passed on: the count never moved');
  t.equal(held(), 1);
  line.give();
  t.equal(places.active, 0);
  t.equal(held(), 0);
});

t.test('a waiter whose client goes away leaves the line holding nothing', async (t) => {
  const places = new SharedReadPlaces(1);
  const { line } = lineOn(places);
  t.equal(await line.take(new AbortController().signal), 'held');
  const gone = new AbortController();
  const leaving = line.take(gone.signal);
  const staying = line.take(new AbortController().signal);
  gone.abort();
  t.equal(await leaving, 'gone');
  t.equal(line.waiting, 1, 'it left the line at once');
  line.give();
  t.equal(await staying, 'held', 'the place went to the reader behind it');
  line.give();
  t.equal(places.active, 0);
});

t.test('a waiter not served within the open timeout is refused', async (t) => {
  const places = new SharedReadPlaces(1);
  const { line } = lineOn(places, 0.05);
  t.equal(await line.take(new AbortController().signal), 'held');
  t.equal(await line.take(new AbortController().signal), 'busy');
  t.equal(line.waiting, 0);
  line.give();
  t.equal(places.active, 0, 'the refused reader took nothing');
});

t.test('a place given back elsewhere wakes the line (Atomics.notify, not the safety net)', async (t) => {
  const places = new SharedReadPlaces(1);
  const a = lineOn(places);
  const b = lineOn(places);
  t.equal(await a.line.take(new AbortController().signal), 'held');
  const waiting = b.line.take(new AbortController().signal);
  t.equal(await settled(waiting), 'pending');
  a.line.give();
  t.equal(await waiting, 'held', 'the other thread\'s waiter took it');
  t.equal(b.held(), 1);
  t.equal(a.held(), 0);
  // The main thread gives a place back the same way (SharedReadPlaces.give).
  const next = a.line.take(new AbortController().signal);
  t.equal(await settled(next), 'pending');
  places.give();
  t.equal(await next, 'held', 'a place the main thread gave back wakes it too');
});

t.test('a place given back while the main thread\'s line waits tells the main thread', async (t) => {
  const places = new SharedReadPlaces(1);
  const { line, toMain } = lineOn(places);
  t.equal(await line.take(new AbortController().signal), 'held');
  places.waiting = 1; // as the main thread's gate sets it
  line.give();
  t.equal(toMain(), 1);
  t.equal(places.active, 0);
});
