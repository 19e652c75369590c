// The prerendered counter and histogram families (storage/metrics/prerenderedFamilies.ts), read back
// by the strict Prometheus text reader of test/support: escaped label values, cumulative buckets
// whose +Inf equals _count, and the whole KilnMetrics text one valid exposition.
import t from 'tap';
import { KilnMetrics } from '../../../storage/index.js';
import { parseScrape } from '../../support/prometheus.js';

t.test('hostile cache names are escaped and counted exactly', async (t) => {
  const metrics = new KilnMetrics({ enabled: true, labelTopn: 10 });
  const names = ['plain', 'quo"te', 'back\\slash', 'new\nline', '} 1\nkiln_fake 9'];
  names.forEach((name, i) => {
    for (let n = 0; n <= i; n++) metrics.narinfoAnswered(name, 'hit');
    metrics.narBytesServed(name, 100 * (i + 1));
  });
  const scrape = parseScrape(await metrics.text());
  names.forEach((name, i) => {
    t.equal(scrape.value('kiln_cache_narinfo_requests_total', { cache: name, outcome: 'hit' }), i + 1, JSON.stringify(name));
    t.equal(scrape.value('kiln_cache_nar_served_bytes_total', { cache: name }), 100 * (i + 1));
  });
  t.notOk(scrape.types.has('kiln_fake'), 'a label value cannot inject a series');
});

t.test('histogram buckets are cumulative, with +Inf = _count and an exact _sum', async (t) => {
  const metrics = new KilnMetrics({ enabled: true, labelTopn: 10 });
  const seconds = [0.0001, 0.0005, 0.003, 0.003, 0.2, 31, 100];
  for (const s of seconds) metrics.httpRequest('cache', 'get', 200, s);
  metrics.httpRequest('api/caches', 'put', 201, 0.02);
  const text = await metrics.text();
  const scrape = parseScrape(text); // throws on buckets that are not cumulative or a +Inf unlike _count
  t.equal(scrape.value('kiln_http_request_duration_seconds', { group: 'cache', method: 'get', status: '200' }), seconds.length);
  const line = (le: string) => text.split('\n').find((l) => l.startsWith(`kiln_http_request_duration_seconds_bucket{group="cache",method="get",status="200",le="${le}"}`));
  t.equal(line('0.0005'), 'kiln_http_request_duration_seconds_bucket{group="cache",method="get",status="200",le="0.0005"} 2', 'a value on a bound is in that bucket');
  t.match(line('0.005'), / 4$/);
  t.match(line('30'), / 5$/);
  t.match(line('+Inf'), / 7$/);
  t.match(text, /kiln_http_request_duration_seconds_sum\{group="cache",method="get",status="200"\} 131\.2066/);
  const snapshot = (await metrics.snapshot()).find((f) => f.name === 'kiln_http_request_duration_seconds');
  t.equal(snapshot?.type, 'histogram');
  t.equal(snapshot?.values.find((v) => v.metricName === 'kiln_http_request_duration_seconds_count' && v.labels['group'] === 'cache')?.value, seconds.length);
});
