// What one scrape reads (docs/metrics.md, "What a scrape costs"): the CPU pool's statistics, whose
// percentiles piscina computes at every read, are read once per scrape for the five series made
// from them, and afresh at the next scrape.
import t from 'tap';
import { KilnMetrics } from '../../../storage/index.js';
import { registerServerMetrics } from '../../../services/metrics/index.js';
import { testDatabase } from '../../support/db.js';
import { parseScrape } from '../../support/prometheus.js';

t.test('the CPU pool statistics are read once per scrape', async (t) => {
  const { sql } = await testDatabase(t);
  const metrics = new KilnMetrics({ enabled: true, labelTopn: 5 });
  let reads = 0;
  registerServerMetrics({
    metrics, sql, pools: { web: sql },
    workers: { connected: () => [] }, nars: { hotCacheStats: () => ({ bytes: 0, capacityBytes: 0, entries: 0, hits: 0, misses: 0 }) },
    cpu: { stats: () => ({ queued: ++reads, threads: 1, utilization: 0, completed: 0, runMs: { p50: 0, p99: 0 }, waitMs: { p50: 0, p99: 0 } }) }, labelTopn: 5,
  });
  const first = parseScrape(await metrics.text());
  t.equal(reads, 1, 'one read for the five CPU pool series');
  t.equal(first.value('kiln_cpu_pool_queued_tasks'), 1);
  const second = parseScrape(await metrics.text());
  t.equal(reads, 2, 'the next scrape reads again');
  t.equal(second.value('kiln_cpu_pool_queued_tasks'), 2, 'and shows the new figures');
});
