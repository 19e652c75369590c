// build.retryBackoffSecs at its default (30 s) on a real server whose clock moves only when the test
// steps it, with a protocol-level worker (no Nix): a build whose attempt fails FailedTransient is not
// dispatched again before its wait has passed and is dispatched once it has; the wait doubles for
// the next attempt (spec: configuration.md, build.retryBackoffSecs).
import t from 'tap';
import { jobFailure } from '../../../protocol/index.js';
import { startTestKiln } from '../../support/kiln.js';
import { subscribedProject } from '../../support/subscribedProject.js';
import { steppedClock } from '../../support/clock.js';
import { eventually } from '../../support/events.js';
import { handshake, testHello } from '../../support/protoClient.js';
import { derivationNode, narHash } from '../../support/derivationNodes.js';

t.test('a transient failure waits build.retryBackoffSecs, doubled for every earlier attempt', async (t) => {
  const clock = steppedClock(new Date());
  // the defaults: build.retryBackoffSecs 30, build.maxAttempts 3
  const kiln = await startTestKiln(t, { localWorker: true }, { clock });
  const { token, projectId, cache } = await subscribedProject(kiln);
  const worker = await handshake(`ws://127.0.0.1:${kiln.port}/proto`, testHello());
  t.teardown(() => worker.close());
  await worker.next('welcome');

  const flaky = derivationNode('flaky');
  await kiln.api('POST', `/tasks/${projectId}/default/evaluate`, { token, body: { commit: 'a'.repeat(40) } });
  const evalJob = await worker.next('evalJob');
  worker.send({ t: 'evalBatch', jobId: evalJob.jobId, derivations: [flaky.derivation], attributes: [{ path: ['packages', 'x86_64-linux', 'flaky'], drvPath: flaky.drvPath, outputs: { out: flaky.out } }], errors: [] });
  worker.send({ t: 'evalResult', jobId: evalJob.jobId, commit: 'a'.repeat(40), derivationCount: 1, attributeCount: 1, errorCount: 0, durationMs: 1 });

  const row = async () => (await kiln.sql<{ status: string; attempts: number; not_before: Date | null }[]>`
    select db.status, db.attempts, db.not_before from derivation_builds db join derivations d on d.id = db.derivation_id
    where d.drv_path = ${flaky.drvPath}`)[0]!;
  const failTransiently = async (jobId: string, attempt: number) => {
    worker.send({ t: 'jobFailed', jobId, failure: jobFailure('network', 'the network went away'), durationMs: 1, logBytes: 0, logDroppedBytes: 0 });
    return eventually(`attempt ${attempt} re-queued`, async () => {
      const r = await row();
      return r.status === 'queued' && r.attempts === attempt ? r : undefined;
    });
  };

  let job = await worker.next('buildJob');
  t.match(job.jobId, /:1$/);
  for (const [attempt, waitMs] of [[1, 30_000], [2, 60_000]] as const) {
    const failedAt = clock.now().getTime();
    const queued = await failTransiently(job.jobId, attempt);
    t.equal(queued.not_before?.getTime(), failedAt + waitMs, `after attempt ${attempt} the build waits ${waitMs / 1000} s`);

    clock.step(waitMs - 1);
    await kiln.scheduler.passNow();
    t.match(await row(), { status: 'queued', attempts: attempt }, `1 ms before its wait is over, attempt ${attempt + 1} is not dispatched`);

    clock.step(1);
    await kiln.scheduler.passNow();
    t.match(await row(), { status: 'started', attempts: attempt + 1 }, `once the wait is over, attempt ${attempt + 1} is dispatched`);
    job = await worker.next('buildJob');
    t.match(job.jobId, new RegExp(`:${attempt + 1}$`));
  }

  worker.send({
    t: 'buildResult', jobId: job.jobId, drvPath: flaky.drvPath, alreadyValid: false, durationMs: 1, logBytes: 0, logDroppedBytes: 0,
    outputs: [{ name: 'out', path: flaky.out, narHash: narHash(), narSize: 100, references: [], deriver: flaky.drvPath, ca: null }],
  });
  t.match(await eventually('the third attempt completes', async () => {
    const r = await row();
    return r.status === 'completed' ? r : undefined;
  }), { attempts: 3 });
});
