// GET /caches/{cache}/metrics and GET /board/cache (docs/metrics.md, "Stored metrics") on a running
// kiln: narinfo answers and NAR bytes the test sends are stored by the flush and read back exactly,
// per minute and rolled up; a private cache's series is 404 to a stranger; the board lists only
// what the caller may see; malformed queries are 400 invalid_query naming the parameter.
import t from 'tap';
import { startTestKiln } from '../../../support/kiln.js';
import { signUp } from '../../../support/accounts.js';
import { createTestCache } from '../../../support/caches.js';
import { buildFixturePaths } from '../../../support/nixStore.js';
import { localNar, uploadChunked } from '../../../support/narUploads.js';

interface Point { start: string; narinfo_hits: number; narinfo_misses: number; upstream_hits: number; nar_bytes_served: number; hit_ratio: number | null }
interface Series { cache: string; period: string; points: Point[] }
interface BoardRow { cache: string; paths: number; bytes: number; last_hour: Omit<Point, 'start'>; last_day: Omit<Point, 'start'>; top_paths: { store_path: string | null; file_hash: string; fetches: number; bytes: number }[] }

t.test('stored cache traffic', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  const eve = await signUp(kiln, 'eve');
  await createTestCache(kiln.sql, 'pub', { public: true, ownerId: ada.id });
  await createTestCache(kiln.sql, 'secret', { public: false, ownerId: ada.id });
  const tree = localNar(buildFixturePaths().tree);
  const uploaded = await uploadChunked(kiln, ada.token, 'pub', tree);
  t.equal(uploaded.status, 200);
  const { file_size: fileSize, file_hash: fileHash } = uploaded.body.message as { file_size: number; file_hash: string };

  const hits = 4;
  const misses = 2;
  for (let i = 0; i < hits; i++) t.equal((await fetch(`${kiln.url}/cache/pub/${tree.hash}.narinfo`)).status, 200);
  for (let i = 0; i < misses; i++) t.equal((await fetch(`${kiln.url}/cache/pub/${String(i).repeat(32)}.narinfo`)).status, 404);
  t.equal((await fetch(`${kiln.url}/cache/pub/nar/${fileHash}.nar.zst`)).status, 200);
  await kiln.upkeep.trafficFlush();
  await kiln.upkeep.metricRollup();

  t.test('the series per minute and per hour hold exactly the traffic sent', async (t) => {
    for (const period of ['minute', 'hour', 'day']) {
      const res = await kiln.api<Series>('GET', `/caches/pub/metrics?period=${period}`, { token: eve.token });
      t.equal(res.status, 200, period);
      const sum = (k: 'narinfo_hits' | 'narinfo_misses' | 'nar_bytes_served') => res.message.points.reduce((n, p) => n + p[k], 0);
      t.same([sum('narinfo_hits'), sum('narinfo_misses'), sum('nar_bytes_served')], [hits, misses, fileSize], `${period}: ${JSON.stringify(res.message.points)}`);
    }
  });

  t.test('a private cache is 404 to a stranger, readable by its owner', async (t) => {
    const res = await kiln.api('GET', '/caches/secret/metrics', { token: eve.token });
    t.same([res.status, res.code], [404, 'not_found']);
    t.equal((await kiln.api('GET', '/caches/secret/metrics', { token: ada.token })).status, 200);
  });

  t.test('malformed queries are 400 naming the parameter', async (t) => {
    for (const [query, field] of [['period=second', 'period'], ['from=yesterday', 'from'], ['from=2026-11-26T00:00:00Z&to=2026-11-25T00:00:00Z', 'from'],
      ['period=minute&from=2020-01-01T00:00:00Z', 'from'], ['bogus=1', 'bogus'], [`to=${'9'.repeat(100)}`, 'to']] as const) {
      const res = await kiln.api<string>('GET', `/caches/pub/metrics?${query}`, { token: ada.token });
      t.same([res.status, res.code], [400, 'invalid_query'], query);
      t.match(res.message, field, query);
    }
  });

  t.test('the board lists the caches each caller may see, with the last hour and day', async (t) => {
    const mine = await kiln.api<BoardRow[]>('GET', '/board/cache', { token: ada.token });
    t.same(mine.message.map((r) => r.cache), ['pub', 'secret'], 'busiest first');
    const pub = mine.message[0]!;
    t.same([pub.paths, pub.bytes, pub.last_hour.narinfo_hits, pub.last_day.narinfo_misses, pub.last_day.nar_bytes_served], [1, fileSize, hits, misses, fileSize]);
    t.equal(pub.last_day.hit_ratio, +(hits / (hits + misses)).toFixed(4));
    t.equal(pub.top_paths.length, 1, 'one NAR file fetched');
    t.same([pub.top_paths[0]!.file_hash, pub.top_paths[0]!.fetches, pub.top_paths[0]!.bytes], [fileHash, 1, fileSize]);
    t.match(pub.top_paths[0]!.store_path, tree.hash, 'named by the store path it holds');
    t.same(mine.message[1]!.top_paths, [], 'nothing fetched from secret');
    const theirs = await kiln.api<BoardRow[]>('GET', '/board/cache', { token: eve.token });
    t.same(theirs.message.map((r) => r.cache), ['pub']);
    t.equal((await kiln.api('GET', '/board/cache')).status, 401);
  });
});
