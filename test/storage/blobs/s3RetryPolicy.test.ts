// The retry policy on its own: which failures it retries and when it stops. The same policy is
// installed in the S3 client (see s3BlobStore.test.ts for attempts against a real closed port).
import t from 'tap';
import { S3RetryPolicy, retryErrorType } from '../../../storage/blobs/s3RetryPolicy.js';

const failing = (errors: unknown[]) => {
  let calls = 0;
  return {
    get calls() {
      return calls;
    },
    attempt: async () => {
      const error = errors[calls++];
      if (error !== undefined) throw error;
      return 'done';
    },
  };
};

t.test('failures are classified the way the SDK does', async (t) => {
  t.equal(retryErrorType(Object.assign(new Error('reset'), { code: 'ECONNRESET' })), 'TRANSIENT');
  t.equal(retryErrorType({ name: 'InternalError', $metadata: { httpStatusCode: 500 } }), 'TRANSIENT');
  t.equal(retryErrorType({ name: 'TimeoutError' }), 'TRANSIENT');
  t.equal(retryErrorType({ name: 'SlowDown', $metadata: { httpStatusCode: 503 } }), 'THROTTLING');
  t.equal(retryErrorType({ name: 'X', $metadata: { httpStatusCode: 429 } }), 'THROTTLING');
  t.equal(retryErrorType({ name: 'AccessDenied', $metadata: { httpStatusCode: 403 } }), 'CLIENT_ERROR');
  t.equal(retryErrorType(Object.assign(new Error('no such file'), { code: 'ENOENT' })), 'CLIENT_ERROR');
  t.equal(retryErrorType('a string'), 'CLIENT_ERROR');
});

t.test('run() retries transient failures up to maxAttempts', async (t) => {
  const reset = Object.assign(new Error('reset'), { code: 'ECONNRESET' });
  const twice = failing([reset, reset]);
  t.equal(await new S3RetryPolicy({ maxAttempts: 3, retryWindowMs: 60_000 }).run(twice.attempt), 'done');
  t.equal(twice.calls, 3);

  const always = failing([reset, reset, reset, reset]);
  await t.rejects(new S3RetryPolicy({ maxAttempts: 2, retryWindowMs: 60_000 }).run(always.attempt), reset, 'the last error, not the policy’s');
  t.equal(always.calls, 2);
});

t.test('run() gives up at once on client errors and after the retry window', async (t) => {
  const denied = { name: 'AccessDenied', $metadata: { httpStatusCode: 403 } };
  const refused = failing([denied]);
  await t.rejects(new S3RetryPolicy({ maxAttempts: 5, retryWindowMs: 60_000 }).run(refused.attempt), denied);
  t.equal(refused.calls, 1);

  const reset = Object.assign(new Error('reset'), { code: 'ECONNRESET' });
  const late = failing([reset, reset]);
  await t.rejects(new S3RetryPolicy({ maxAttempts: 5, retryWindowMs: 0 }).run(late.attempt), reset);
  t.equal(late.calls, 1, 'a window of 0 allows no retry, even one due in the same millisecond');

  let now = 1_000_000;
  const stepping = failing([reset, reset, reset, reset]);
  const windowed = new S3RetryPolicy({ maxAttempts: 10, retryWindowMs: 5_000, now: () => now });
  await t.rejects(
    windowed.run(async () => {
      now += 2_000; // each attempt takes 2 s on the injected clock: retries start at 2 s and 4 s, a third would at 6 s
      return stepping.attempt();
    }),
    reset,
  );
  t.equal(stepping.calls, 3, 'no retry starts once s3.retryTimeoutSecs has passed');
});

t.test('the policy refuses tokens it did not issue', async (t) => {
  const policy = new S3RetryPolicy({ maxAttempts: 3, retryWindowMs: 1000 });
  await t.rejects(policy.refreshRetryTokenForRetry({ getRetryCount: () => 0, getRetryDelay: () => 0 }, { errorType: 'TRANSIENT' }), /did not issue/);
  const token = await policy.acquireInitialRetryToken();
  const next = await policy.refreshRetryTokenForRetry(token, { errorType: 'THROTTLING', retryAfterHint: new Date(Date.now() + 50) });
  t.equal(next.getRetryCount(), 1);
  t.ok(next.getRetryDelay() <= 20_000);
});
