// The change jobs table (services/builds/changeJobs.ts, the open_pr action's worker jobs): which
// connection gets a changeJob, and every way one ends exactly once: the worker's changeResult,
// jobFailed or jobRefused, the loss of the worker, a timeout (with a cancelJob to the worker), the
// server stopping. A message about the job from another worker is not taken as its answer.
import t from 'tap';
import { jobFailure, PROTOCOL_VERSION, type Outgoing } from '../../../protocol/index.js';
import { ChangeJobs, type ChangeWorker } from '../../../services/builds/changeJobs.js';

interface RecordingWorker extends ChangeWorker { sent: Outgoing[] }

function worker(workerId: string, opts: { eval?: boolean; projects?: string[]; open?: boolean } = {}): RecordingWorker {
  const sent: Outgoing[] = [];
  return {
    hello: { workerId, capabilities: { eval: opts.eval ?? true } }, open: opts.open ?? false, projects: opts.projects ?? [], sent,
    link: { send: (message) => sent.push(message), close: () => undefined },
  };
}

const PROJECT = '0b0c6c55-4f3a-4d7e-9a52-1f2e3d4c5b6a';
const request = {
  project: PROJECT, repository: 'http://127.0.0.1:1/acme/app.git', commit: 'a'.repeat(40), command: ['true'],
  pushTo: 'http://127.0.0.1:1/acme/app.git', pushAccess: { token: 'w', resolve: null }, branch: 'kiln/default',
  author: { name: null, email: null }, message: 'update',
};
const v = PROTOCOL_VERSION;
const jobIdOf = (w: RecordingWorker) => {
  const job = w.sent.find((m) => m.t === 'changeJob');
  if (!job || job.t !== 'changeJob') throw new Error('no changeJob sent');
  return job.jobId;
};

t.test('a change job goes to a connected evaluating worker serving the project, and ends with its answer', async (t) => {
  const builder = worker('builder', { eval: false, projects: [PROJECT] });
  const stranger = worker('stranger', { projects: ['another'] });
  const none = new ChangeJobs({ connected: () => [builder, stranger] });
  t.notOk(none.canRun(PROJECT));
  t.same(await none.run(request), { ok: false, error: 'no connected evaluating worker serves the project', transient: true });
  t.same([...builder.sent, ...stranger.sent], [], 'nothing sent to a worker that does not evaluate or serve the project');

  const evaluator = worker('evaluator', { projects: [PROJECT] });
  const jobs = new ChangeJobs({ connected: () => [builder, stranger, evaluator] });
  t.ok(jobs.canRun(PROJECT));
  const pushed = jobs.run(request);
  const jobId = jobIdOf(evaluator);
  t.match(evaluator.sent[0], { t: 'changeJob', project: PROJECT, branch: 'kiln/default', pushAccess: { token: 'w' } });
  t.notOk(jobs.received(stranger, { v, t: 'changeResult', jobId, pushed: 'b'.repeat(40), durationMs: 1 }), 'another worker cannot answer for it');
  t.ok(jobs.received(evaluator, { v, t: 'jobAccepted', jobId }));
  t.ok(jobs.received(evaluator, { v, t: 'changeResult', jobId, pushed: 'c'.repeat(40), durationMs: 5 }));
  t.same(await pushed, { ok: true, pushed: 'c'.repeat(40) });
  t.notOk(jobs.received(evaluator, { v, t: 'changeResult', jobId, pushed: null, durationMs: 5 }), 'an ended job takes no second answer');

  const failed = jobs.run(request);
  t.ok(jobs.received(evaluator, { v, t: 'jobFailed', jobId: jobIdOf({ ...evaluator, sent: evaluator.sent.slice(1) }), failure: jobFailure('worker_error', 'exit 4: broken'), durationMs: 3, logBytes: 0, logDroppedBytes: 0 }));
  t.same(await failed, { ok: false, error: 'worker_error: exit 4: broken', transient: false });

  const refused = jobs.run(request);
  t.ok(jobs.received(evaluator, { v, t: 'jobRefused', jobId: jobIdOf({ ...evaluator, sent: evaluator.sent.slice(2) }), refusal: 'unsupported', message: 'no eval here' }));
  t.same(await refused, { ok: false, error: 'the worker refused the job (unsupported): no eval here', transient: true });
});

t.test('a lost worker, a timeout and a stopping server end a change job as a failure', async (t) => {
  const evaluator = worker('evaluator', { open: true });
  const jobs = new ChangeJobs({ connected: () => [evaluator] });
  const lost = jobs.run(request);
  jobs.lost('someone-else');
  t.ok(jobs.received(evaluator, { v, t: 'jobAccepted', jobId: jobIdOf(evaluator) }), 'another worker\'s loss leaves it open');
  jobs.lost('evaluator');
  t.same(await lost, { ok: false, error: 'the worker was lost before it answered', transient: true });

  const stopped = jobs.run(request);
  jobs.failAll('the server stopped before the worker answered');
  t.same(await stopped, { ok: false, error: 'the server stopped before the worker answered', transient: true });

  const impatient = new ChangeJobs({ connected: () => [evaluator] }, 20);
  evaluator.sent.length = 0;
  const timedOut = await impatient.run(request);
  t.match(timedOut, { ok: false, error: /did not answer within/, transient: true });
  const jobId = jobIdOf(evaluator);
  t.match(evaluator.sent, [{ t: 'changeJob', jobId }, { t: 'cancelJob', jobId, reason: 'the change job timed out' }], 'the worker is told to stop');
  t.notOk(impatient.received(evaluator, { v, t: 'changeResult', jobId, pushed: null, durationMs: 1 }), 'a late answer is not taken');
});
