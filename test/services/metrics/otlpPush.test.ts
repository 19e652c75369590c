// OTLP push (services/metrics/otlpPush.ts) to a loopback collector that decodes the real protobuf
// (test/support/otlpCollector.ts): the pushed series are the scrape's, with the counts the test
// made; a collector outside outbound.allowedNetworks gets nothing; a collector that is down costs a
// warning and no crash; without a flush, pushes come every interval.
import t from 'tap';
import pino from 'pino';
import { Writable } from 'node:stream';
import { createOutboundClient, KilnMetrics } from '../../../storage/index.js';
import { startOtlpPush } from '../../../services/index.js';
import { startOtlpCollector } from '../../support/otlpCollector.js';
import { freePort } from '../../support/kiln.js';
import { eventually } from '../../support/events.js';

function capturingLog() {
  const lines: { msg: string; reason?: string }[] = [];
  const log = pino({ level: 'warn' }, new Writable({ write(chunk: Buffer, _enc, done) { lines.push(JSON.parse(chunk.toString()) as { msg: string }); done(); } }));
  return { log, lines };
}

const sample = () => {
  const metrics = new KilnMetrics({ enabled: true, labelTopn: 5 });
  for (let i = 0; i < 7; i++) metrics.narinfoAnswered('pub', 'hit');
  metrics.narinfoAnswered('pub', 'miss');
  for (const s of [0.0003, 0.02, 2]) metrics.httpRequest('cache', 'get', 200, s);
  return metrics;
};

t.test('a push carries the same series, decoded from the protobuf', async (t) => {
  const collector = await startOtlpCollector();
  t.teardown(() => collector.close());
  const { log, lines } = capturingLog();
  const push = await startOtlpPush({ endpoint: collector.url, intervalSecs: 3600, metrics: sample(), log, version: 'test', outbound: createOutboundClient({ allowedNetworks: ['127.0.0.0/8'] }) });
  t.teardown(() => push.stop());
  await push.flush();
  t.equal(collector.pushes.length, 1);
  const [pushed] = collector.pushes;
  t.equal(pushed!.resource['service.name'], 'kiln');
  const narinfo = pushed!.metrics.find((m) => m.name === 'kiln_cache_narinfo_requests_total');
  t.same([narinfo?.kind, narinfo?.monotonic], ['sum', true]);
  t.equal(narinfo?.points.find((p) => p.attributes['cache'] === 'pub' && p.attributes['outcome'] === 'hit')?.value, 7);
  t.equal(narinfo?.points.find((p) => p.attributes['outcome'] === 'miss')?.value, 1);
  const http = pushed!.metrics.find((m) => m.name === 'kiln_http_request_duration_seconds');
  t.equal(http?.kind, 'histogram');
  t.equal(http?.unit, 's');
  const point = http?.points[0];
  t.same(point?.attributes, { group: 'cache', method: 'get', status: '200' });
  t.equal(point?.count, 3);
  t.equal(point?.bucketCounts?.reduce((a, b) => a + b, 0), 3, 'per-bucket counts, not cumulative');
  t.equal(point?.bucketCounts?.length, (point?.bounds?.length ?? 0) + 1);
  t.ok(Math.abs((point?.sum ?? 0) - 2.0203) < 1e-9);
  t.ok(pushed!.metrics.some((m) => m.name === 'kiln_nodejs_eventloop_lag_seconds' && m.kind === 'gauge'), 'the process series too');
  t.same(lines, []);
});

t.test('outside outbound.allowedNetworks: nothing is sent, a warning', async (t) => {
  const collector = await startOtlpCollector();
  t.teardown(() => collector.close());
  const { log, lines } = capturingLog();
  const push = await startOtlpPush({ endpoint: collector.url, intervalSecs: 3600, metrics: sample(), log, version: 'test', outbound: createOutboundClient({ allowedNetworks: ['192.0.2.0/24'] }) });
  t.teardown(() => push.stop());
  await push.flush();
  t.equal(collector.pushes.length, 0);
  t.match(lines, [{ msg: /OTLP push failed/, reason: /allowedNetworks/ }]);
});

t.test('a collector that is down: a warning per push, no crash', async (t) => {
  const port = await freePort();
  const { log, lines } = capturingLog();
  const push = await startOtlpPush({ endpoint: `http://127.0.0.1:${port}/`, intervalSecs: 3600, metrics: sample(), log, version: 'test', outbound: createOutboundClient({ allowedNetworks: ['127.0.0.0/8'] }) });
  await push.flush();
  await push.flush();
  t.equal(lines.filter((l) => /OTLP push failed/.test(l.msg)).length, 2);
  await push.stop();
});

t.test('metrics.otlp.pushIntervalSecs: pushes come by themselves, one an interval', async (t) => {
  const collector = await startOtlpCollector();
  t.teardown(() => collector.close());
  const { log } = capturingLog();
  const push = await startOtlpPush({ endpoint: collector.url, intervalSecs: 1, metrics: sample(), log, version: 'test', outbound: createOutboundClient({ allowedNetworks: ['127.0.0.0/8'] }) });
  t.teardown(() => push.stop());
  // No flush: only the interval's timer pushes (an interval the reader ignored would never come).
  await eventually('two pushes on the interval', async () => (collector.pushes.length >= 2 ? true : undefined));
  t.ok(collector.pushes.length >= 2);
});
