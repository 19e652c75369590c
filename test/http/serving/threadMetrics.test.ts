// What serving threads answer from their own memory counts in /metrics as the main thread's answers
// do (docs/metrics.md, "Serving threads"): narinfo hits and misses in
// kiln_cache_narinfo_requests_total and every answer in kiln_http_request_duration_seconds, reported
// by each thread in batches. Real sockets through `http.threads` 2, each request on a connection of
// its own so that the kernel spreads them over the listeners.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { get } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { startTestKiln, type TestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { eventually } from '../../support/eventually.js';
import { buildFixturePaths } from '../../support/nixStore.js';
import { localNar, uploadChunked } from '../../support/narUploads.js';
import { parseScrape, type Scrape } from '../../support/prometheus.js';
import { threadSum, type ActorNode } from '../../support/servingThreads.js';
import { ACCESS_TTL_MS } from '../../../http/serving/threadHotCache.js';

const dir = mkdtempSync(join(tmpdir(), 'kiln-thread-metrics-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const tokenFile = join(dir, 'token');
writeFileSync(tokenFile, 'scrape-secret\n');

async function scrape(kiln: TestKiln): Promise<Scrape> {
  const res = await fetch(`${kiln.url}/metrics`, { headers: { authorization: 'Bearer scrape-secret' } });
  if (res.status !== 200) throw new Error(`scrape answered ${res.status}: ${await res.text()}`);
  return parseScrape(await res.text());
}

/** A GET on a connection of its own: its status. */
function status(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    get(url, { agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    }).on('error', reject);
  });
}


t.test('narinfos a thread answers from memory are counted', async (t) => {
  const kiln = await startTestKiln(t, { 'http.threads': 2, 'metrics.tokenFile': tokenFile });
  const ada = await signUp(kiln, 'ada');
  await createTestCache(kiln.sql, 'pub', { public: true, ownerId: ada.id });
  const tree = localNar(buildFixturePaths().tree);
  t.equal((await uploadChunked(kiln, ada.token, 'pub', tree)).status, 200);
  const fromMemory = async () => threadSum((await kiln.api<ActorNode>('GET', '/admin/actors', { token: ada.token })).message, 'fromMemory');

  const before = await scrape(kiln);
  const memoryBefore = await fromMemory();
  const hits = 40;
  const misses = 20;
  // Each thread learns an answer from the first request it relays, then answers from memory. Past
  // half the access word's TTL (threadHotCache.ts) a thread's answer from memory also asks the main
  // thread for a background refresh: that refresh is not a request and must not be counted.
  const ask = async () => {
    for (let i = 0; i < hits / 2; i++) t.equal(await status(`${kiln.url}/cache/pub/${tree.hash}.narinfo`), 200);
    for (let i = 0; i < misses / 2; i++) t.equal(await status(`${kiln.url}/cache/pub/${'0'.repeat(32)}.narinfo`), 404);
  };
  await ask();
  await new Promise((resolve) => setTimeout(resolve, ACCESS_TTL_MS / 2 + 500));
  await ask();
  t.ok((await fromMemory()) > memoryBefore, 'the threads answered some from memory');

  const delta = (after: Scrape, name: string, labels: Record<string, string>) => after.value(name, labels) - before.value(name, labels);
  const after = await eventually(() => scrape(kiln), {
    until: (s) => delta(s, 'kiln_cache_narinfo_requests_total', { cache: 'pub', outcome: 'hit' }) >= hits
      && delta(s, 'kiln_cache_narinfo_requests_total', { cache: 'pub', outcome: 'miss' }) >= misses,
    message: 'every narinfo answer is counted',
  });
  await new Promise((resolve) => setTimeout(resolve, 500)); // a late report (every 100 ms) would show an over-count
  const settled = await scrape(kiln);
  t.ok(after);
  t.equal(delta(settled, 'kiln_cache_narinfo_requests_total', { cache: 'pub', outcome: 'hit' }), hits, 'each hit counted once');
  t.equal(delta(settled, 'kiln_cache_narinfo_requests_total', { cache: 'pub', outcome: 'miss' }), misses, 'each miss counted once');
  const answers = (s: Scrape, code: string) => delta(s, 'kiln_http_request_duration_seconds_count', { group: 'cache', method: 'get', status: code });
  const counted = await eventually(() => scrape(kiln), { until: (s) => answers(s, '200') >= hits && answers(s, '404') >= misses, message: 'every answer in the HTTP histogram' });
  t.ok(answers(counted, '200') >= hits && answers(counted, '404') >= misses, 'the HTTP histogram counts the threads\' answers');
});
