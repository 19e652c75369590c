import t, { type Test } from 'tap';
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { memoryRateLimiter, openRateLimiter, redisRateLimiter, takeToken, type RateLimiter } from '../../../storage/index.js';

const REDIS_URL = process.env['KILN_TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const log = pino({ level: 'silent' });

t.test('token bucket arithmetic', async (t) => {
  const policy = { burst: 3, refillMs: 1000 };
  let state = takeToken(undefined, policy, 0);
  t.same(state.decision, { allowed: true, remaining: 2, retryAfterMs: 0 }, 'a new bucket starts full');
  state = takeToken(state.state, policy, 0);
  state = takeToken(state.state, policy, 0);
  t.equal(state.decision.remaining, 0);
  const refused = takeToken(state.state, policy, 250);
  t.same(refused.decision, { allowed: false, remaining: 0, retryAfterMs: 750 }, 'three quarters of a token to go');
  t.equal(takeToken(refused.state, policy, 1000).decision.allowed, true, 'a token back after refillMs');
  t.equal(takeToken(refused.state, policy, 1_000_000).decision.remaining, 2, 'refill stops at the burst');
});

async function behaves(t: Test, limiter: RateLimiter, key: string, advance?: (ms: number) => void) {
  const policy = { burst: 180, refillMs: 333 }; // the spec's cache limit (ls and serve)
  let allowed = 0;
  for (let i = 0; i < 200; i++) if ((await limiter.take(key, policy)).allowed) allowed++;
  // Redis's clock runs while the loop does, so a token or two may come back during it.
  t.ok(allowed >= 180 && allowed <= 182, `a burst of 180, then refusals (allowed ${allowed})`);
  const refused = await limiter.take(key, policy);
  t.equal(refused.allowed, false);
  t.ok(refused.retryAfterMs > 0 && refused.retryAfterMs <= 333, 'retry after at most one refill period');
  t.equal((await limiter.take(`${key}-other`, policy)).allowed, true, 'keys are independent');
  if (advance) {
    advance(333);
    t.equal((await limiter.take(key, policy)).allowed, true, 'one token back after 333 ms');
    t.equal((await limiter.take(key, policy)).allowed, false);
  }
}

t.test('in memory, with an injected clock', async (t) => {
  let now = 1_000_000;
  const limiter = memoryRateLimiter({ now: () => now });
  await behaves(t, limiter, 'ip:192.0.2.1', (ms) => (now += ms));
  await t.rejects(limiter.take('x', { burst: 0, refillMs: 10 }), /burst must be a positive integer/);
  await limiter.close();
});

t.test('openRateLimiter without redis.url keeps buckets in process', async (t) => {
  const limiter = await openRateLimiter({ 'redis.url': null }, log);
  t.equal((await limiter.take('k', { burst: 1, refillMs: 60_000 })).allowed, true);
  t.equal((await limiter.take('k', { burst: 1, refillMs: 60_000 })).allowed, false);
  await limiter.close();
});

t.test('in Redis, shared by two server processes', async (t) => {
  const namespace = `test-${randomBytes(6).toString('hex')}:`;
  let first: RateLimiter;
  try {
    first = await redisRateLimiter(REDIS_URL, { log, namespace });
  } catch (e) {
    throw new Error(`this test needs Redis at ${REDIS_URL} (set KILN_TEST_REDIS_URL to use another); start it with: redis-server --daemonize yes`, { cause: e });
  }
  const second = await redisRateLimiter(REDIS_URL, { log, namespace });
  t.teardown(async () => {
    await first.close();
    await second.close();
  });
  await behaves(t, first, 'ip:192.0.2.1');
  const slow = { burst: 2, refillMs: 3_600_000 };
  t.equal((await first.take('shared', slow)).allowed, true);
  t.equal((await second.take('shared', slow)).allowed, true);
  const refused = await first.take('shared', slow);
  t.equal(refused.allowed, false, 'the second process spent the same bucket');
  t.ok(refused.retryAfterMs > 3_000_000);
});

t.test('openRateLimiter with redis.url, and a clear error when Redis is absent', async (t) => {
  const limiter = await openRateLimiter({ 'redis.url': REDIS_URL }, log);
  t.equal((await limiter.take(`k-${randomBytes(4).toString('hex')}`, { burst: 1, refillMs: 1000 })).allowed, true);
  await limiter.close();
  await t.rejects(redisRateLimiter('redis://127.0.0.1:1', { log }), /cannot connect to Redis at 127\.0\.0\.1:1 \(redis\.url\)/);
});
