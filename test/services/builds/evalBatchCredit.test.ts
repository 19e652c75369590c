// Evaluation batches under the server's credit (docs/proto.md, "Evaluation batches"), with a
// protocol-level worker against the real server and PostgreSQL: the server grants one batch back
// for each batch it recorded, a worker that waits for credit gets a long graph recorded whole, and
// one that sends past its credit has the extra batch dropped and the evaluation failed (what waits
// on the server for recording stays bounded). Also the worker's side (worker/batchCredit.ts).
import t from 'tap';
import { EVAL_BATCH_WINDOW, type MessageOf } from '../../../protocol/index.js';
import { BatchCredit } from '../../../worker/batchCredit.js';
import { startTestKiln } from '../../support/kiln.js';
import { subscribedProject } from '../../support/subscribedProject.js';
import { handshake, testHello } from '../../support/protoClient.js';
import { derivationNode } from '../../support/derivationNodes.js';
import { eventually } from '../../support/eventually.js';

t.test('the server grants evalBatch credit as it records', async (t) => {
  const kiln = await startTestKiln(t, { localWorker: true });
  const { token, projectId } = await subscribedProject(kiln);
  const worker = await handshake(`ws://127.0.0.1:${kiln.port}/proto`, testHello());
  t.teardown(() => worker.close());
  await worker.next('welcome');
  const evaluate = async () => {
    const evaluated = await kiln.api<string>('POST', `/tasks/${projectId}/default/evaluate`, { token, body: { commit: 'a'.repeat(40) } });
    t.equal(evaluated.status, 200, String(evaluated.message));
    const job = await worker.next('evalJob');
    worker.send({ t: 'jobAccepted', jobId: job.jobId });
    return { evaluationId: evaluated.message, jobId: job.jobId };
  };
  /** the next evalCredit of this job (those left of an earlier job are passed over) */
  const creditFor = async (jobId: string): Promise<MessageOf<'evalCredit'>> => {
    for (;;) {
      const credit = await worker.next('evalCredit');
      if (credit.jobId === jobId) return credit;
    }
  };
  const phaseOf = (evaluationId: string) => eventually(async () => (await kiln.api<{ phase: string; failure_reason?: string | null }>('GET', `/evals/${evaluationId}`, { token })).message,
    { until: (e) => ['building', 'completed', 'failed'].includes(e.phase), message: 'the evaluation is recorded or failed' });

  await t.test('a worker that waits for credit: a graph of 3 windows is recorded whole', async (t) => {
    const { evaluationId, jobId } = await evaluate();
    const count = EVAL_BATCH_WINDOW * 3;
    const nodes = Array.from({ length: count }, (_, i) => derivationNode(`credit-${i}`));
    let credit = EVAL_BATCH_WINDOW;
    for (const node of nodes) {
      while (credit === 0) credit += (await creditFor(jobId)).batches;
      credit -= 1;
      worker.send({ t: 'evalBatch', jobId, derivations: [node.derivation], attributes: [], errors: [] });
    }
    while (credit === 0) credit += (await creditFor(jobId)).batches;
    worker.send({ t: 'evalBatch', jobId, derivations: [], attributes: nodes.map((n, i) => ({ path: ['packages', 'x86_64-linux', `p${i}`], drvPath: n.drvPath, outputs: { out: n.out } })), errors: [] });
    worker.send({ t: 'evalResult', jobId, commit: 'a'.repeat(40), derivationCount: count, attributeCount: count, errorCount: 0, durationMs: 10 });
    t.not((await phaseOf(evaluationId)).phase, 'failed');
    const [recorded] = await kiln.sql<{ n: number }[]>`select count(*)::int as n from builds where evaluation_id = ${evaluationId}`;
    t.equal(recorded?.n, count, 'every batch recorded');
  });

  await t.test('a worker that sends past its credit: the extra batch is dropped and the evaluation fails', async (t) => {
    const { evaluationId, jobId } = await evaluate();
    const nodes = Array.from({ length: EVAL_BATCH_WINDOW + 1 }, (_, i) => derivationNode(`flood-${i}`));
    for (const node of nodes) worker.send({ t: 'evalBatch', jobId, derivations: [node.derivation], attributes: [], errors: [] });
    worker.send({ t: 'evalResult', jobId, commit: 'a'.repeat(40), derivationCount: nodes.length, attributeCount: 0, errorCount: 0, durationMs: 10 });
    const ended = await phaseOf(evaluationId);
    t.equal(ended.phase, 'failed');
    t.match(JSON.stringify(ended), /more evaluation batches than the server granted/);
    const credits: MessageOf<'evalCredit'>[] = [];
    for (let i = 0; i < EVAL_BATCH_WINDOW; i++) credits.push(await creditFor(jobId));
    t.equal(credits.reduce((n, c) => n + c.batches, 0), EVAL_BATCH_WINDOW, 'credit back for the batches taken, none for the dropped one');
  });
});

t.test('the worker waits for credit past the window', async (t) => {
  const credit = new BatchCredit();
  const signal = new AbortController().signal;
  for (let i = 0; i < EVAL_BATCH_WINDOW; i++) await credit.take(signal);
  let sent = false;
  const next = credit.take(signal).then(() => { sent = true; });
  await new Promise((resolve) => setImmediate(resolve));
  t.notOk(sent, 'the batch past the window waits');
  credit.grant(1);
  await next;
  t.ok(sent, 'and goes with the credit');
  const abort = new AbortController();
  const waiting = credit.take(abort.signal);
  abort.abort(new Error('cancelled'));
  await t.rejects(waiting, /cancelled/, 'a cancelled evaluation stops waiting');
});
