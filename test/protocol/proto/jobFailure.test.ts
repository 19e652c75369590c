// A worker's JobFailure (protocol/proto/failureClass.ts): the class follows from the reason, and
// `worker_lost` is the server's own reason for a lost worker, never accepted from a worker.
import t from 'tap';
import { JobFailure, jobFailure } from '../../../protocol/index.js';

t.test('a failure a worker may send', async (t) => {
  t.ok(JobFailure.safeParse(jobFailure('builder_failed', 'exit 1', 1)).success);
  t.ok(JobFailure.safeParse(jobFailure('network', 'timed out')).success);
});

t.test('refused: a class that does not follow from the reason', async (t) => {
  const parsed = JobFailure.safeParse({ class: 'FailedTransient', reason: 'builder_failed', message: 'x' });
  t.notOk(parsed.success);
  t.match(parsed.error?.issues[0]?.message, /class does not match/);
});

t.test('refused: worker_lost, the server\'s own reason', async (t) => {
  const parsed = JobFailure.safeParse({ class: 'FailedTransient', reason: 'worker_lost', message: 'I was lost' });
  t.notOk(parsed.success);
  t.same(parsed.error?.issues.map((i) => i.path.join('.')), ['reason']);
  t.match(parsed.error?.issues[0]?.message, /set by the server/);
});
