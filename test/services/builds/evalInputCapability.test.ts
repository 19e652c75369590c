// The shared evaluation cache's capability as the scheduler hands it out (docs/eval-cache.md): every
// dispatch of an evaluation carries `inputCache` {url, token} for that evaluation, the token answers
// while the evaluation runs and stops answering once its result is in; a second dispatch replaces it.
import t from 'tap';
import { startTestKiln } from '../../support/kiln.js';
import { subscribedProject } from '../../support/subscribedProject.js';
import { handshake, testHello } from '../../support/protoClient.js';
import { eventually } from '../../support/eventually.js';

t.test('each evaluation job carries a capability valid while the evaluation runs', async (t) => {
  const kiln = await startTestKiln(t, { localWorker: true });
  const { token, projectId } = await subscribedProject(kiln);
  const worker = await handshake(`ws://127.0.0.1:${kiln.port}/proto`, testHello());
  t.teardown(() => worker.close());
  await worker.next('welcome');
  const evaluated = await kiln.api<string>('POST', `/tasks/${projectId}/default/evaluate`, { token, body: { commit: 'a'.repeat(40) } });
  t.equal(evaluated.status, 200, String(evaluated.message));
  const job = await worker.next('evalJob');
  worker.send({ t: 'jobAccepted', jobId: job.jobId });
  t.equal(job.inputCache?.url, `${kiln.url}/eval-inputs/${evaluated.message}`);
  const query = (cap: { url: string; token: string }) => fetch(`${cap.url}/query?token=${cap.token}`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ narHashes: ['a'.repeat(64)] }),
  });
  const res = await query(job.inputCache!);
  t.equal(res.status, 200, 'the token answers while the evaluation runs');
  t.same(((await res.json()) as { message: unknown }).message, { present: [] });
  t.equal((await query({ ...job.inputCache!, token: `${job.inputCache!.token.slice(0, -1)}x` })).status, 404, 'another token does not');

  worker.send({ t: 'evalResult', jobId: job.jobId, commit: 'a'.repeat(40), derivationCount: 0, attributeCount: 0, errorCount: 0, durationMs: 1 });
  await eventually(async () => (await kiln.api<{ phase: string }>('GET', `/evals/${evaluated.message}`, { token })).message,
    { until: (e) => e.phase !== 'evaluating', message: 'the evaluation left evaluating' });
  t.equal((await query(job.inputCache!)).status, 404, 'the token ends with the evaluation');
});
