import t from 'tap';
import { signUp } from '../../support/accounts.js';
import { eventually, openLive, startEventKiln } from '../../support/events.js';

// A lagging live socket (fed by uWS topics) gets stream.lagged with the number of events it
// missed, then continues with the newest, like a lagging firehose subscriber.

t.test('a lagging live socket gets stream.lagged with skipped, then the newest events', async (t) => {
  const kiln = await startEventKiln(t, { options: { firehoseLagBytes: 64 * 1024 } });
  const ada = await signUp(kiln, 'ada');
  const slow = await openLive(kiln, '/board/live', ada.token);
  t.teardown(() => slow.close());
  slow.socket.pause();
  const padding = 'x'.repeat(10_000);
  let n = 0;
  const publish = () => {
    kiln.events.bus.publish({ event: 'worker.queue_depth', scope: {}, frame: JSON.stringify({ event: 'worker.queue_depth', at: new Date().toISOString(), content: { queued: n++, padding } }) });
  };
  // 30 MB for a reader that does not read: far past the kernel's buffers and the 64 KiB bound.
  const N = 3000;
  while (n < N) {
    publish();
    if (n % 100 === 0) await new Promise((r) => setImmediate(r));
  }
  slow.socket.resume();
  await eventually('an event after the last stream.lagged', async () => {
    const last = slow.frames.at(-1);
    if (last && last.event !== 'stream.lagged' && (last.content['queued'] as number) >= N && slow.frames.some((f) => f.event === 'stream.lagged')) return true;
    publish();
    return undefined;
  });
  const lastSeen = slow.frames.at(-1)!.content['queued'] as number;
  let previous = -1;
  let received = 0;
  let skippedTotal = 0;
  let notices = 0;
  let disorder = 0;
  for (const [i, f] of slow.frames.entries()) {
    if (f.event === 'stream.lagged') {
      notices += 1;
      const skipped = f.content['skipped'] as number;
      skippedTotal += skipped;
      const next = slow.frames[i + 1]?.content['queued'] as number;
      t.equal(next - previous - 1, skipped, `notice ${notices}: skipped ${skipped}, exactly the gap between ${previous} and ${next}`);
    } else {
      const queued = f.content['queued'] as number;
      if (queued <= previous) disorder += 1;
      previous = queued;
      received += 1;
    }
  }
  t.equal(disorder, 0, 'events arrive in order, none twice');
  t.ok(notices >= 1 && skippedTotal > 0, `${notices} notice(s), ${skippedTotal} skipped`);
  t.equal(received + skippedTotal, lastSeen + 1, 'every event up to the last is either received or counted as skipped');
});
