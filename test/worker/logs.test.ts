import t from 'tap';
import type { Outgoing } from '../../protocol/index.js';
import { BuildLogStream } from '../../worker/buildLogStream.js';
import { LogLimiter, parseNixLogLine } from '../../worker/index.js';

t.test('internal-json: builder lines, Nix messages and errors', async (t) => {
  t.same(parseNixLogLine('@nix {"action":"result","fields":["about to fail"],"id":5,"type":101}'), { kind: 'log', text: 'about to fail' });
  t.same(parseNixLogLine('@nix {"action":"start","fields":["/nix/store/x.drv","",1,1],"id":7,"level":3,"text":"building \'/nix/store/x.drv\'","type":105}'), { kind: 'log', text: "building '/nix/store/x.drv'" });
  t.same(parseNixLogLine('@nix {"action":"msg","level":0,"msg":"\\u001b[31;1merror:\\u001b[0m builder for \'\\u001b[35;1m/nix/store/x.drv\\u001b[0m\' failed with exit code 3"}'), {
    kind: 'error', text: "builder for '/nix/store/x.drv' failed with exit code 3",
  });
  t.same(parseNixLogLine('@nix {"action":"msg","level":3,"msg":"this derivation will be built:"}'), { kind: 'log', text: 'this derivation will be built:' });
  t.same(parseNixLogLine('@nix {"action":"start","id":1,"level":6,"text":"querying info about missing paths","type":0}'), { kind: 'ignore' });
  t.same(parseNixLogLine('@nix {"action":"result","fields":[101,0],"id":3,"type":106}'), { kind: 'ignore' });
  t.same(parseNixLogLine('@nix {"action":"stop","id":3}'), { kind: 'ignore' });
  t.same(parseNixLogLine('@nix not json'), { kind: 'log', text: '@nix not json' });
  t.same(parseNixLogLine('@nix 42'), { kind: 'ignore' });
  t.same(parseNixLogLine('plain stderr'), { kind: 'log', text: 'plain stderr' });
  t.same(parseNixLogLine(''), { kind: 'ignore' });
});

t.test('the limiter: burst per minute and sustained per hour, on an injected clock', async (t) => {
  let now = 0;
  const limiter = new LogLimiter({ burstBytesPerMin: 100, sustainedBytesPerHour: 150 }, () => now);
  t.ok(limiter.admit(60));
  t.notOk(limiter.admit(60), 'over the burst');
  now += 30_000; // half a minute refills half the burst
  t.ok(limiter.admit(50));
  now += 60_000;
  t.notOk(limiter.admit(60), 'the hourly budget is spent even though the minute refilled');
  t.equal(limiter.forwardedBytes, 110);
  t.equal(limiter.droppedBytes, 120);
  const unlimited = new LogLimiter({ burstBytesPerMin: 0, sustainedBytesPerHour: 0 }, () => 0);
  t.ok(unlimited.admit(1e9), '0 means no cap');
});

t.test('the stream: chunks, a one-time notice, dropped bytes carried to the next chunk', async (t) => {
  const sent: Outgoing[] = [];
  const sink = { send: (m: Outgoing) => sent.push(m) > 0, bufferedAmount: 0 };
  let now = 0;
  const stream = new BuildLogStream('job-1', sink, new LogLimiter({ burstBytesPerMin: 20, sustainedBytesPerHour: 0 }, () => now));
  stream.line('0123456789');
  stream.line('this line is too long for the rest of the burst');
  stream.line('and so is this one, dropped');
  const totals = stream.close();
  t.equal(sent.length, 1);
  const chunk = sent[0] as Extract<Outgoing, { t: 'buildLog' }>;
  t.match(Buffer.from(chunk.data).toString(), /^0123456789\n\[kiln\] the log is over its forwarding cap/);
  t.equal(chunk.droppedBytes, 76, 'the dropped lines, counted before the chunk that follows them');
  t.same(totals, { logBytes: 11, logDroppedBytes: 76 });
  sink.bufferedAmount = 1 << 30;
  const congested = new BuildLogStream('job-2', sink, new LogLimiter({ burstBytesPerMin: 0, sustainedBytesPerHour: 0 }));
  congested.line('nobody is reading');
  t.same(congested.close(), { logBytes: 18, logDroppedBytes: 18 }, 'a congested socket drops logs instead of queueing them');
});
