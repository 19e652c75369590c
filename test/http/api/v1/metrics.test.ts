// GET /metrics and /api/v1/metrics (docs/metrics.md): the bearer token of metrics.tokenFile (404
// without one, 401 on a missing or wrong token, a rotated token works at once), and a scrape parsed
// by a real Prometheus text parser whose counters move by exactly the traffic the test sent.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { startTestKiln, type TestKiln } from '../../../support/kiln.js';
import { signUp } from '../../../support/accounts.js';
import { createTestCache } from '../../../support/caches.js';
import { buildFixturePaths } from '../../../support/nixStore.js';
import { localNar, uploadChunked } from '../../../support/narUploads.js';
import { parseScrape, type Scrape } from '../../../support/prometheus.js';

const dir = mkdtempSync(join(tmpdir(), 'kiln-metrics-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const tokenFile = join(dir, 'token');
writeFileSync(tokenFile, 'scrape-secret-1\n');

const bearer = (token: string) => ({ headers: { authorization: token } });

async function scrape(kiln: TestKiln, path = '/metrics', token = 'scrape-secret-1'): Promise<Scrape> {
  const res = await fetch(`${kiln.url}${path}`, { headers: { authorization: `Bearer ${token}` } });
  if (res.status !== 200) throw new Error(`scrape answered ${res.status}: ${await res.text()}`);
  return parseScrape(await res.text());
}

t.test('without metrics.tokenFile the endpoint does not exist', async (t) => {
  const kiln = await startTestKiln(t);
  for (const path of ['/metrics', '/api/v1/metrics']) {
    const res = await fetch(`${kiln.url}${path}`, bearer('Bearer anything'));
    t.same([res.status, ((await res.json()) as { code: string }).code], [404, 'not_found'], path);
  }
});

t.test('with metrics.tokenFile', async (t) => {
  // labelTopn 1: the first cache seen keeps its own series, the next is folded into "other".
  const kiln = await startTestKiln(t, { 'metrics.tokenFile': tokenFile, 'metrics.labelTopn': 1 });
  const ada = await signUp(kiln, 'ada');
  await createTestCache(kiln.sql, 'pub', { public: true, ownerId: ada.id });
  await createTestCache(kiln.sql, 'more', { public: true, ownerId: ada.id });
  const fixtures = buildFixturePaths();
  const tree = localNar(fixtures.tree);
  const uploaded = await uploadChunked(kiln, ada.token, 'pub', tree);
  t.equal(uploaded.status, 200);
  const fileSize = (uploaded.body.message as { file_size: number }).file_size;
  const fileHash = (uploaded.body.message as { file_hash: string }).file_hash;

  t.test('a missing, malformed or wrong token is 401; the right one on either path is 200', async (t) => {
    for (const path of ['/metrics', '/api/v1/metrics']) {
      const refused = async (init: RequestInit) => {
        const res = await fetch(`${kiln.url}${path}`, init);
        return [res.status, ((await res.json()) as { code: string }).code];
      };
      t.same(await refused({}), [401, 'unauthorized'], `${path} without a token`);
      t.same(await refused(bearer('Bearer scrape-secret-2')), [401, 'invalid_token'], `${path} with a wrong token`);
      t.same(await refused(bearer('Basic c2NyYXBlLXNlY3JldC0x')), [401, 'invalid_token'], `${path} with Basic`);
      t.same(await refused(bearer('Bearer scrape-secret-1x')), [401, 'invalid_token'], `${path} with a longer token`);
      t.same(await refused(bearer('Bearer scrape-secret-')), [401, 'invalid_token'], `${path} with a prefix of the token`);
      const res = await fetch(`${kiln.url}${path}`, { headers: { authorization: 'Bearer scrape-secret-1' } });
      t.equal(res.status, 200, path);
      t.match(res.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
    }
  });

  t.test('a rotated token file is read at the next scrape', async (t) => {
    writeFileSync(tokenFile, 'scrape-secret-rotated');
    t.teardown(() => writeFileSync(tokenFile, 'scrape-secret-1\n'));
    t.equal((await fetch(`${kiln.url}/metrics`, bearer('Bearer scrape-secret-1'))).status, 401);
    t.ok(await scrape(kiln, '/metrics', 'scrape-secret-rotated'));
  });

  t.test('narinfo hits, misses and NAR bytes move by exactly the traffic sent', async (t) => {
    const before = await scrape(kiln);
    const hits = 7;
    const misses = 3;
    for (let i = 0; i < hits; i++) t.equal((await fetch(`${kiln.url}/cache/pub/${tree.hash}.narinfo`)).status, 200);
    for (let i = 0; i < misses; i++) t.equal((await fetch(`${kiln.url}/cache/pub/${String(i).repeat(32)}.narinfo`)).status, 404);
    // A HEAD sends no bytes and counts none.
    t.equal((await fetch(`${kiln.url}/cache/pub/nar/${fileHash}.nar.zst`)).status, 200);
    t.equal((await fetch(`${kiln.url}/cache/pub/nar/${fileHash}.nar.zst`, { method: 'HEAD' })).status, 200);
    const after = await scrape(kiln);
    const delta = (name: string, labels: Record<string, string>) => after.value(name, labels) - before.value(name, labels);
    t.equal(delta('kiln_cache_narinfo_requests_total', { cache: 'pub', outcome: 'hit' }), hits);
    t.equal(delta('kiln_cache_narinfo_requests_total', { cache: 'pub', outcome: 'miss' }), misses);
    t.equal(delta('kiln_cache_nar_served_bytes_total', { cache: 'pub' }), fileSize);
    t.equal(after.value('kiln_cache_nar_ingested_bytes_total', { cache: 'pub' }), fileSize, 'the upload was counted');
    t.equal(delta('kiln_http_request_duration_seconds', { group: 'cache', method: 'get', status: '200' }), hits + 1, JSON.stringify(after.labelSets('kiln_http_request_duration_seconds')));
    t.equal(delta('kiln_http_request_duration_seconds', { group: 'cache', method: 'get', status: '404' }), misses);
    t.equal(delta('kiln_http_request_duration_seconds', { group: 'cache', method: 'head', status: '200' }), 1);
    t.equal(after.types.get('kiln_http_request_duration_seconds'), 'histogram');
    t.equal(after.types.get('kiln_cache_narinfo_requests_total'), 'counter');
  });

  t.test('past metrics.labelTopn caches are folded into "other"', async (t) => {
    const before = await scrape(kiln);
    t.equal((await fetch(`${kiln.url}/cache/more/${'0'.repeat(32)}.narinfo`)).status, 404);
    const after = await scrape(kiln);
    t.equal(after.value('kiln_cache_narinfo_requests_total', { cache: 'other', outcome: 'miss' }) - before.value('kiln_cache_narinfo_requests_total', { cache: 'other', outcome: 'miss' }), 1);
    t.same(after.labelSets('kiln_cache_narinfo_requests_total').filter((l) => l['cache'] === 'more'), []);
    const storage = after.labelSets('kiln_cache_storage_bytes').map((l) => l['cache']).sort();
    t.same(storage, ['other', 'pub'], 'storage: the largest cache, the rest as other');
    t.equal(after.value('kiln_cache_storage_bytes', { cache: 'pub' }), fileSize);
    t.equal(after.value('kiln_cache_paths', { cache: 'pub' }), 1);
  });

  t.test('route groups, methods and statuses are bounded', async (t) => {
    await fetch(`${kiln.url}/no/such/${'x'.repeat(20)}`);
    await fetch(`${kiln.url}/api/v1/caches/pub`, { method: 'PROPFIND' });
    await kiln.api('GET', '/health');
    const after = await scrape(kiln);
    const sets = after.labelSets('kiln_http_request_duration_seconds');
    t.ok(sets.some((l) => l['group'] === 'api/health' && l['method'] === 'get' && l['status'] === '200'));
    t.ok(sets.some((l) => l['group'] === 'unmatched' && l['method'] === 'other'));
    t.notOk(sets.some((l) => (l['group'] ?? '').includes('x'.repeat(20)) || l['method'] === 'propfind'));
  });

  t.test('scrape-time series: queue, builds, evaluations, workers, process', async (t) => {
    const after = await scrape(kiln);
    t.equal(after.value('kiln_queue_depth', { kind: 'build' }), 0);
    t.equal(after.value('kiln_builds', { status: 'queued' }), 0);
    t.equal(after.value('kiln_workers_connected'), 0);
    t.ok(after.value('kiln_cpu_pool_tasks_completed_total') >= 1, 'the upload hashed and compressed in the CPU pool');
    t.ok(after.value('kiln_cpu_pool_task_seconds', { stage: 'run', quantile: '0.99' }) > 0, 'and took time there');
    t.same([after.value('kiln_upload_permits', { state: 'granted' }), after.value('kiln_upload_permits', { state: 'waiting' })], [0, 0], 'no upload in progress or waiting');
    t.equal(after.types.get('kiln_hot_cache_lookups_total'), 'counter');
    t.ok(after.value('kiln_hot_cache_lookups_total', { result: 'hit' }) >= 7);
    for (const name of ['kiln_nodejs_eventloop_lag_seconds', 'kiln_nodejs_heap_size_used_bytes', 'kiln_cpu_pool_queued_tasks', 'kiln_webhook_backlog']) {
      t.ok(after.types.has(name), name);
    }
    t.equal(after.value('kiln_metrics_collect_failures_total'), 0);
  });
});
