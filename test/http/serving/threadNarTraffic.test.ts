// The NAR files serving threads send themselves are counted as the main thread's own answers
// (http/serving/threadNars.ts reports them per file and grant, counted; docs/http.md "Serving
// threads"): every GET adds its fetch and bytes to the stored per-file counts and the per-minute
// series, and a HEAD adds nothing. Many GETs of one file in one report must count as many.
import { request as httpRequest } from 'node:http';
import t from 'tap';
import { startTestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { buildFixturePaths } from '../../support/nixStore.js';
import { localNar, uploadChunked } from '../../support/narUploads.js';
import { threadSum } from '../../support/servingThreads.js';
import { eventually } from '../../support/events.js';

/** One request on a connection of its own, so that they spread over both threads. */
function fresh(url: string, method: 'GET' | 'HEAD'): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method, agent: false, headers: { connection: 'close' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

interface TopPath { file_hash: string; fetches: number; bytes: number }

t.test('NARs sent by serving threads are counted per GET', async (t) => {
  const kiln = await startTestKiln(t, { 'http.threads': 2 });
  const owner = await signUp(kiln, 'owner');
  await createTestCache(kiln.sql, 'open', { public: true, ownerId: owner.id });
  const tree = localNar(buildFixturePaths().tree);
  const uploaded = await uploadChunked(kiln, owner.token, 'open', tree);
  t.equal(uploaded.status, 200);
  const { file_size: fileSize, file_hash: fileHash } = uploaded.body.message as { file_size: number; file_hash: string };
  const url = `${kiln.url}/cache/open/nar/${fileHash}.nar.zst`;

  const gets = 40;
  const before = threadSum(kiln.root.inspect(), 'nars');
  // in waves, so that most arrive while a thread already holds the grant (and the file in memory)
  for (let wave = 0; wave < 4; wave++) {
    const statuses = await Promise.all(Array.from({ length: gets / 4 }, () => fresh(url, 'GET')));
    t.same([...new Set(statuses)], [200], `wave ${wave}`);
  }
  t.same([...new Set(await Promise.all(Array.from({ length: 6 }, () => fresh(url, 'HEAD'))))], [200], 'HEADs');
  t.ok(threadSum(kiln.root.inspect(), 'nars') - before > gets / 2, 'the threads sent most of them');
  // the threads report every 100 ms; each flush stores what the main thread counted so far
  const open = await eventually('every GET stored', async () => {
    await kiln.upkeep.trafficFlush();
    await kiln.upkeep.metricRollup();
    const board = await kiln.api<{ cache: string; top_paths: TopPath[]; last_day: { nar_bytes_served: number } }[]>('GET', '/board/cache', { token: owner.token });
    const row = board.message.find((r) => r.cache === 'open');
    return row && row.top_paths.reduce((n, p) => n + p.fetches, 0) >= gets ? row : undefined;
  });
  t.same(open.top_paths.map((p) => [p.file_hash, p.fetches, p.bytes]), [[fileHash, gets, gets * fileSize]], 'every GET counted, with its bytes; no HEAD');
  t.equal(open.last_day.nar_bytes_served, gets * fileSize, 'the series carries every GET\'s bytes');
});
