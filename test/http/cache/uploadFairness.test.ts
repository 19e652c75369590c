// Upload fairness with real HTTP uploads and the real UploadBudget: one tenant's slow uploads do not
// hold every upload.concurrency permit, and a body slower than upload.minBytesPerSec is cut with
// 408 upload_too_slow and gives its permit back. The rate is measured with a clock the test moves,
// so nothing sleeps through the 30 s window.
import { connect, type Socket } from 'node:net';
import t from 'tap';
import type { TimerClock } from '../../../http/index.js';
import type { SupervisorNode } from '../../../supervisors/index.js';
import { startTestKiln, type TestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { putChunk } from '../../support/narUploads.js';
import { eventually } from '../../support/eventually.js';

/** Time that moves only when the test says so; timers fire as it passes them. */
class ManualClock implements TimerClock {
  private time = 0;
  private readonly timers = new Set<{ at: number; fire: () => void }>();
  now = (): number => this.time;
  setTimer(ms: number, fire: () => void): { cancel(): void } {
    const timer = { at: this.time + ms, fire };
    this.timers.add(timer);
    return { cancel: () => void this.timers.delete(timer) };
  }
  get pending(): number {
    return this.timers.size;
  }
  advance(ms: number): void {
    this.time += ms;
    for (const timer of [...this.timers].sort((a, b) => a.at - b.at)) {
      if (timer.at > this.time || !this.timers.delete(timer)) continue;
      timer.fire();
    }
  }
}

const MiB = 1 << 20;
const until = async (what: string, ok: () => boolean): Promise<void> => {
  await eventually(ok, { timeout: 60_000, interval: 5, message: what });
};

function budgetOf(kiln: TestKiln): Record<string, number> {
  const find = (node: SupervisorNode): Record<string, number> | undefined => {
    for (const child of node.children) {
      if (child.kind === 'upload-budget' && 'summary' in child) return child.summary as Record<string, number>;
      if ('children' in child) {
        const found = find(child as SupervisorNode);
        if (found) return found;
      }
    }
    return undefined;
  };
  const summary = find(kiln.root.inspect());
  if (!summary) throw new Error('no upload-budget actor in the tree');
  return summary;
}

/**
 * A `nix copy` NAR PUT that declares `declared` bytes and sends `sent` of them, then, while
 * `feeding`, 16 KiB every 250 ms of real time: uWebSockets closes a body that brings less than
 * 16 KiB/s in its own 10 s timeout (docs/binary-cache.md, "Upload fairness"), so a test that ran
 * over 10 s under load lost its trickles to uWS instead of to kiln's check. The feed stays far
 * below the rates the tests judge (their windows are on the manual clock); its answer when one comes.
 */
function slowPut(kiln: TestKiln, cache: string, token: string, name: string, declared: number, sent: number, feeding = true) {
  const socket: Socket = connect(kiln.port, '127.0.0.1');
  let text = '';
  let written = sent;
  socket.on('data', (d) => void (text += d.toString('latin1')));
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  const auth = Buffer.from(`nix:${token}`).toString('base64');
  socket.write(`PUT /cache/${cache}/nar/${name}.nar.xz HTTP/1.1\r\nHost: kiln\r\nAuthorization: Basic ${auth}\r\nContent-Length: ${declared}\r\n\r\n`);
  socket.write(Buffer.alloc(sent, 7));
  const feed = setInterval(() => {
    const piece = Math.min(FEED_PIECE, declared - written - 1);
    if (!feeding || piece <= 0 || socket.destroyed) return;
    written += piece;
    socket.write(Buffer.alloc(piece, 7));
  }, 250);
  closed.then(() => clearInterval(feed), () => undefined);
  return {
    socket,
    /** stops the feed and sends the rest of the declared body */
    finish: () => {
      clearInterval(feed);
      socket.write(Buffer.alloc(declared - written, 7));
      written = declared;
    },
    stop: () => {
      clearInterval(feed);
      socket.destroy();
    },
    /** the status line and body once the server answered and closed */
    answer: async () => {
      await closed;
      return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text };
    },
  };
}
const FEED_PIECE = 16 * 1024;
/** Far above the feed (64 KiB/s of real time): a window on the manual clock judges the feed slow. */
const FAST = 8 * MiB;

t.test('slow uploads of one tenant leave permits for others, and are cut below the minimum rate', async (t) => {
  const clock = new ManualClock();
  const kiln = await startTestKiln(t, { 'upload.concurrency': 2, 'upload.restWaitSecs': 2, 'upload.minBytesPerSec': FAST }, { bodyRateClock: clock });
  const ada = await signUp(kiln, 'ada');
  const bob = await signUp(kiln, 'bob');
  const cache = await createTestCache(kiln.sql, 'shared', { public: true, ownerId: ada.id });
  await kiln.sql`insert into cache_members (cache_id, user_id, role) values (${cache.id}, ${bob.id}, 'Write')`;

  // ada starts two 256 MiB uploads and trickles them: one permit is hers, the other upload waits.
  const trickles = ['0000', '0001'].map((n) => slowPut(kiln, 'shared', ada.token, `${n}${'a'.repeat(28)}`, 256 * MiB, 1024));
  t.teardown(() => trickles.forEach((p) => p.stop()));
  await until('both of ada\'s uploads asked for a permit', () => (budgetOf(kiln)['largeInFlight'] ?? 0) + (budgetOf(kiln)['waiting'] ?? 0) === 2);
  t.match(budgetOf(kiln), { largeInFlight: 1, waiting: 1 }, 'alone, ada holds one of the two permits; the other stays free');

  // bob's REST chunk is admitted at once: before, ada held both permits and bob got 503 upload_busy.
  const chunk = await putChunk(kiln, bob.token, 'shared', `2222${'b'.repeat(28)}`, 0, Buffer.alloc(2 * MiB, 1));
  t.equal(chunk.status, 200, `bob's upload went through: ${JSON.stringify(chunk.body)}`);

  // ada's admitted upload waits for its body: 29 s of waiting is not yet a window.
  await until('the body of the admitted upload is being waited for', () => clock.pending === 1);
  clock.advance(29_000);
  t.same(budgetOf(kiln)['largeInFlight'], 1, 'still running before the window is over');
  clock.advance(1_000);
  // Which of the two was admitted first is the server's choice (their sign-ins are checked concurrently).
  const [cut, cutIndex] = await Promise.race(trickles.map(async (p, i) => [await p.answer(), i] as const));
  t.equal(cut.status, 408, 'cut once 30 s of waiting brought under the minimum rate');
  t.match(cut.text, /upload_too_slow/);
  t.match(cut.text, /upload\.minBytesPerSec/);
  // Not drained like other refusals (http/drain.ts): the server stopped waiting for this client.
  t.match(cut.text, /\r\nConnection: close\r\n/i, 'the 408 closes its connection at once');
  // Its permit went back, to ada's waiting upload, whose body is now watched in turn.
  await until('the waiting upload got the permit', () => budgetOf(kiln)['waiting'] === 0 && clock.pending === 1);
  clock.advance(30_000);
  t.equal((await trickles[1 - cutIndex]!.answer()).status, 408);
  await until('every permit is back', () => budgetOf(kiln)['largeInFlight'] === 0);
  t.same(
    (await kiln.sql<{ upload_key: string }[]>`select upload_key from staged_uploads where upload_key like 'nar/%'`).length,
    0,
    'nothing of the cut uploads was staged',
  );
});

// The exact boundary (30,000 bytes in 30 s at 1000 bytes/s is met) is judgeRateWindow's, in bodyRate.test.ts: here the
// real-time feed puts the body well above it.
t.test('a body at the minimum rate is not cut; 0 turns the check off', async (t) => {
  const clock = new ManualClock();
  const kiln = await startTestKiln(t, { 'upload.minBytesPerSec': 1000 }, { bodyRateClock: clock });
  const ada = await signUp(kiln, 'ada');
  await createTestCache(kiln.sql, 'pub', { public: true, ownerId: ada.id });
  const put = slowPut(kiln, 'pub', ada.token, `3333${'c'.repeat(28)}`, 16 * MiB, 30_000);
  t.teardown(() => put.stop());
  await until('the body is waited for', () => clock.pending === 1);
  clock.advance(30_000);
  await until('a new window started', () => clock.pending === 1);
  t.equal((budgetOf(kiln)['largeInFlight'] ?? 0) + (budgetOf(kiln)['smallInFlight'] ?? 0), 1, '30,000 bytes in 30 s meets 1000 bytes/s: still running');
  put.finish();
  t.equal((await put.answer()).status, 200, 'and it completes');

  const off = await startTestKiln(t, { 'upload.minBytesPerSec': 0 }, { bodyRateClock: clock });
  const bob = await signUp(off, 'bob');
  await createTestCache(off.sql, 'pub', { public: true, ownerId: bob.id });
  const idle = slowPut(off, 'pub', bob.token, `4444${'d'.repeat(28)}`, 10_000, 10);
  t.teardown(() => idle.stop());
  await until('the upload is admitted', () => budgetOf(off)['smallInFlight'] === 1);
  t.equal(clock.pending, 0, 'no timer is set when the check is off');
});
