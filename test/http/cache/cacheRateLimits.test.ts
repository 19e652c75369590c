// The spec's cache limits, exactly (Limits): ls and serve share one bucket per client with a burst of
// 180, log has its own with a burst of 900, and both refill one request per 333 ms. Through a real
// server with the in-process limiter on an injected clock, and the same policies in Redis.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { redisRateLimiter } from '../../../storage/index.js';
import { cacheRateLimits } from '../../../http/cache/cacheRateLimits.js';
import { startTestKiln } from '../../support/kiln.js';
import { createTestCache } from '../../support/caches.js';

const REDIS_URL = process.env['KILN_TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const HASH = '0'.repeat(32);

t.test('cache rate limits through the server', async (t) => {
  let now = 1_700_000_000_000;
  const kiln = await startTestKiln(t, {}, { rateLimitClock: { now: () => now } });
  await createTestCache(kiln.sql, 'pub', { public: true });
  const files = [`/cache/pub/ls/${HASH}`, `/cache/pub/${HASH}.ls`, `/cache/pub/serve/${HASH}/a`];
  const get = async (path: string) => {
    const res = await fetch(kiln.url + path);
    await res.arrayBuffer();
    return res;
  };
  /** requests until the first 429 (at most `limit + 5`), and that 429 */
  const drain = async (paths: string[], limit: number) => {
    for (let i = 0; i < limit + 5; i++) {
      const res = await get(paths[i % paths.length]!);
      if (res.status === 429) return { allowed: i, refused: res };
    }
    return { allowed: limit + 5, refused: null };
  };

  const burst = await drain(files, 180);
  t.equal(burst.allowed, 180, 'ls (both forms) and serve share one bucket of 180');
  t.equal(burst.refused?.headers.get('retry-after'), '1', 'the refusal says when to come back (333 ms, rounded up to 1 s)');
  t.equal((await get(`/cache/pub/log/${HASH}.drv`)).status, 404, 'the log bucket is another one: not refused');

  now += 332;
  t.equal((await get(files[0]!)).status, 429, 'no token back before 333 ms');
  now += 1;
  t.equal((await get(files[2]!)).status, 404, 'one token back at 333 ms');
  t.equal((await get(files[1]!)).status, 429, 'and only one');
  now += 333 * 10;
  t.equal((await drain(files, 10)).allowed, 10, 'ten tokens back after ten refill periods');
  now += 333 * 10_000;
  t.equal((await drain(files, 180)).allowed, 180, 'refill stops at the burst');

  const logs = await drain([`/cache/pub/log/${HASH}.drv`], 900);
  t.equal(logs.allowed, 900, 'log: a burst of 900 (the one taken above came back while the clock moved on)');
  now += 333;
  t.equal((await get(`/cache/pub/log/${HASH}.drv`)).status, 404, 'log refills one per 333 ms too');
  t.equal((await get(`/cache/pub/log/${HASH}.drv`)).status, 429);
});

t.test('the cache policies in Redis', async (t) => {
  const namespace = `test-${randomBytes(6).toString('hex')}:`;
  const limiter = await redisRateLimiter(REDIS_URL, { log: pino({ level: 'silent' }), namespace });
  t.teardown(() => limiter.close());
  const { Redis } = await import('ioredis');
  const redis = new Redis(REDIS_URL);
  t.teardown(() => redis.quit());
  /** moves a bucket's last take back by `ms`: Redis's clock cannot be stepped, the bucket's age can */
  const age = async (key: string, ms: number) => {
    const redisKey = `kiln:ratelimit:${namespace}${key}`;
    const at = Number(await redis.hget(redisKey, 'a'));
    await redis.hset(redisKey, 'a', String(at - ms));
  };
  for (const [policy, burst] of [[cacheRateLimits.files, 180], [cacheRateLimits.log, 900]] as const) {
    const key = `${policy.name}:192.0.2.7`;
    let allowed = 0;
    const started = performance.now();
    let decision = await limiter.take(key, policy);
    for (; decision.allowed; decision = await limiter.take(key, policy)) allowed++;
    // Redis's own clock runs during the loop: a token comes back for each 333 ms it took.
    const comeBack = Math.ceil((performance.now() - started) / 333);
    t.ok(allowed >= burst && allowed <= burst + comeBack, `${policy.name}: a burst of ${burst} (allowed ${allowed}, ${comeBack} may have come back)`);
    t.ok(decision.retryAfterMs > 0 && decision.retryAfterMs <= 333, `${policy.name}: the refusal says retry within one refill of 333 ms`);
    const aged = performance.now();
    await age(key, 333 * 3);
    let back = 0;
    while ((await limiter.take(key, policy)).allowed) back++;
    const more = Math.ceil((performance.now() - aged) / 333);
    t.ok(back >= 3 && back <= 3 + more, `${policy.name}: three tokens back after three refill periods (got ${back}, ${more} more may have come back)`);
  }
});
