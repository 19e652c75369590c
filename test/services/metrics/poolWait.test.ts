// kiln_postgres_pool_wait_seconds (docs/metrics.md): a probe of each pool reserves a connection, so
// with every connection of a pool held the probe waits until one is released, and the scrape says
// so. The wait is a lower bound set by the test (the release comes after a known delay), never an
// upper bound on the machine's speed.
import t from 'tap';
import postgres from 'postgres';
import { setTimeout as sleep } from 'node:timers/promises';
import { KilnMetrics } from '../../../storage/index.js';
import { registerServerMetrics } from '../../../services/metrics/index.js';
import { testDatabase } from '../../support/db.js';
import { parseScrape } from '../../support/prometheus.js';

t.test('a pool whose connections are all busy shows the wait of its probe', async (t) => {
  const { url, sql } = await testDatabase(t);
  const busy = postgres(url, { max: 1, onnotice: () => undefined });
  t.teardown(() => busy.end({ timeout: 5 }));
  const metrics = new KilnMetrics({ enabled: true, labelTopn: 5 });
  registerServerMetrics({
    metrics, sql, pools: { web: sql, cache: busy },
    workers: { connected: () => [] }, nars: { hotCacheStats: () => ({ bytes: 0, capacityBytes: 0, entries: 0, hits: 0, misses: 0 }) },
    cpu: { stats: () => ({ queued: 0, threads: 1, utilization: 0, completed: 0, runMs: { p50: 0, p99: 0 }, waitMs: { p50: 0, p99: 0 } }) }, labelTopn: 5,
  });
  const held = await busy.reserve();
  const scraping = metrics.text();
  await sleep(400);
  held.release();
  const scrape = parseScrape(await scraping);
  t.equal(scrape.types.get('kiln_postgres_pool_wait_seconds'), 'gauge');
  // Held 400 ms; the probe's clock and the timer's may differ by a millisecond or so, and an idle pool waits ~0.
  t.ok(scrape.value('kiln_postgres_pool_wait_seconds', { pool: 'cache' }) >= 0.3, `the busy pool waited ${scrape.value('kiln_postgres_pool_wait_seconds', { pool: 'cache' })} s`);
  t.same(scrape.labelSets('kiln_postgres_pool_wait_seconds').map((l) => l['pool']).sort(), ['cache', 'web']);
});
