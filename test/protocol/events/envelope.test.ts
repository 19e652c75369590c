// The envelope's `at` is memoized for the last time rendered (the events of a turn share it): each
// render still says its own time, and an invalid time throws without spoiling the next.
import t from 'tap';
import { eventTime, renderEnvelope } from '../../../protocol/events/envelope.js';

t.test('each time renders as itself, repeated or not', async (t) => {
  const times = [0, 0, 1_700_000_000_123, 1_700_000_000_123, 1_700_000_000_124, 0, 1_700_000_000_123];
  for (const ms of times) t.equal(eventTime(ms), new Date(ms).toISOString());
  t.same(JSON.parse(renderEnvelope('build.started', 1_700_000_000_999, { a: 1 })), { event: 'build.started', at: '2023-11-14T22:13:20.999Z', content: { a: 1 } });
});

t.test('an invalid time throws, and the next valid one renders', async (t) => {
  t.equal(eventTime(5), new Date(5).toISOString());
  t.throws(() => eventTime(Number.NaN), RangeError);
  t.throws(() => eventTime(Number.NaN), RangeError);
  t.equal(eventTime(5), new Date(5).toISOString());
  t.equal(eventTime(6), new Date(6).toISOString());
});
