// The minimum body rate's policy and its guard, with a clock moved by hand: only time spent waiting
// for the client counts, a window that met the rate starts a new one, and a cut happens once.
import t from 'tap';
import { BodyRateGuard, judgeRateWindow, type TimerClock } from '../../http/bodyRate.js';

const limits = { bytesPerSec: 1000, windowMs: 30_000 };

function manualClock() {
  let time = 0;
  const timers = new Set<{ at: number; fire: () => void }>();
  const clock: TimerClock = {
    now: () => time,
    setTimer(ms, fire) {
      const timer = { at: time + ms, fire };
      timers.add(timer);
      return { cancel: () => void timers.delete(timer) };
    },
  };
  const advance = (ms: number) => {
    time += ms;
    for (const timer of [...timers]) if (timer.at <= time && timers.delete(timer)) timer.fire();
  };
  return { clock, advance, pending: () => timers.size };
}

t.test('judgeRateWindow: open until the window is over, then met or slow', async (t) => {
  t.equal(judgeRateWindow({ waitedMs: 29_999, bytes: 0 }, limits), 'open');
  t.equal(judgeRateWindow({ waitedMs: 30_000, bytes: 30_000 }, limits), 'met', 'exactly the minimum is enough');
  t.equal(judgeRateWindow({ waitedMs: 30_000, bytes: 29_999 }, limits), 'slow');
  t.equal(judgeRateWindow({ waitedMs: 1e9, bytes: 0 }, { ...limits, bytesPerSec: 0 }), 'open', '0 turns the check off');
});

t.test('the guard counts only time spent waiting for the client', async (t) => {
  const { clock, advance, pending } = manualClock();
  const cuts: string[] = [];
  const guard = new BodyRateGuard(limits, clock, (e) => cuts.push(e.code));
  guard.waiting();
  advance(20_000);
  guard.received(100);
  guard.fed();
  advance(600_000); // the reader is busy (disk, a permit): not the client's time
  t.equal(pending(), 0, 'no timer while the reader is busy');
  guard.waiting();
  advance(9_999);
  t.same(cuts, [], '29.999 s of waiting is not a window yet');
  advance(1);
  t.same(cuts, ['upload_too_slow'], 'cut when 30 s of waiting brought 100 bytes');
  t.equal(pending(), 0, 'and no timer is left');
  guard.fed();
  t.same(cuts, ['upload_too_slow'], 'once');
});

t.test('a window that met the rate starts a new one; stop() leaves no timer', async (t) => {
  const { clock, advance, pending } = manualClock();
  const cuts: string[] = [];
  const guard = new BodyRateGuard(limits, clock, (e) => cuts.push(e.code));
  guard.received(30_000);
  guard.waiting();
  advance(30_000);
  t.same(cuts, [], 'met');
  t.equal(pending(), 1, 'the next window is watched');
  advance(30_000);
  t.same(cuts, ['upload_too_slow'], 'the next window brought nothing');
  const other = new BodyRateGuard(limits, clock, (e) => cuts.push(e.code));
  other.waiting();
  other.stop();
  t.equal(pending(), 0);
});
