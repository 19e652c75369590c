// Stage traces end to end (docs/metrics.md, "Stage traces"): a real kiln with log.traceDir and a
// real `kiln worker` process with --log-trace-dir evaluate and build a flake with real Nix; the
// server's file holds each job's root span, the worker's file the worker's job spans below them and
// their stages below those, every line one JSON object, linked by trace and parent span ids.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { startTestKiln } from '../../support/kiln.js';
import { subscribedProject } from '../../support/subscribedProject.js';
import { createFlakeRepo, shellFlake } from '../../support/flakeRepo.js';
import { spawnWorker } from '../../support/workerProcess.js';
import { requireNix } from '../../support/nixStore.js';
import { eventually } from '../../support/eventually.js';

requireNix();

interface Span { trace_id: string; span_id: string; parent_span_id: string | null; name: string; process: string; status: string; duration_ms: number; attributes: Record<string, unknown> }

function spansIn(dir: string, prefix: string): { file: string; spans: Span[] } {
  const files = readdirSync(dir).filter((f) => f.startsWith(prefix) && f.endsWith('.jsonl'));
  if (files.length !== 1) throw new Error(`expected one ${prefix} file in ${dir}, found ${files.join(', ') || 'none'}`);
  const text = readFileSync(join(dir, files[0]!), 'utf8');
  return { file: files[0]!, spans: text.split('\n').filter(Boolean).map((line) => JSON.parse(line) as Span) };
}

t.test('an evaluation and its builds leave linked spans in the server\'s and the worker\'s files', { timeout: 240_000 }, async (t) => {
  const work = mkdtempSync(join(tmpdir(), 'kiln-traces-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));
  const serverTraces = join(work, 'server-traces');
  const workerTraces = join(work, 'worker-traces');
  const kiln = await startTestKiln(t, { localWorker: true, 'log.traceDir': serverTraces });
  const repo = createFlakeRepo(join(work, 'repo'), { 'flake.nix': shellFlake(randomBytes(8).toString('hex'), `      base = mk "kiln-trace-base" "mkdir $out; echo base > $out/data";
      app = mk "kiln-trace-app" "mkdir $out; cat \${base}/data > $out/copied";`) });
  const { token } = await subscribedProject(kiln, { repository: repo.url, publicCache: true });

  const worker = spawnWorker({ serverUrl: `ws://127.0.0.1:${kiln.port}/proto`, baseDir: join(work, 'worker'), args: ['--log-trace-dir', workerTraces] });
  let stopped = false;
  t.teardown(() => (stopped ? undefined : worker.stop()));
  const evaluation = await kiln.api<string>('POST', '/projects/acme/app/evaluate', { token });
  t.equal(evaluation.status, 200, String(evaluation.message));
  const done = await eventually(async () => (await kiln.api<{ phase: string; error: string | null }>('GET', `/evals/${evaluation.message}`, { token })).message,
    { until: (e) => ['completed', 'failed', 'aborted'].includes(e.phase), timeout: 180_000, interval: 200, message: 'the evaluation ends' });
  t.equal(done.phase, 'completed', done.error ?? '');
  await worker.stop(); // the worker's file is complete once it stopped
  stopped = true;

  const server = await eventually(() => {
    const read = spansIn(serverTraces, 'kiln-server-');
    return read.spans.filter((s) => s.name === 'server.build_job').length >= 2 ? read : undefined;
  }, { message: 'the server wrote both builds\' spans' });
  const { spans: workerSpans, file: workerFile } = spansIn(workerTraces, 'kiln-worker-');
  t.match(workerFile, /^kiln-worker-.+-\d+\.jsonl$/, 'one file per process, named by process kind, host and pid');

  const evalRoot = server.spans.find((s) => s.name === 'server.evaluation_job' && s.attributes['evaluation_id'] === evaluation.message)!;
  t.ok(evalRoot, 'the server\'s span of the evaluation job');
  t.match(evalRoot, { parent_span_id: null, status: 'ok', process: 'server', trace_id: /^[0-9a-f]{32}$/, span_id: /^[0-9a-f]{16}$/ });
  const workerEval = workerSpans.find((s) => s.name === 'worker.evaluation_job')!;
  t.match(workerEval, { trace_id: evalRoot.trace_id, parent_span_id: evalRoot.span_id, status: 'ok', process: 'worker' }, 'the worker\'s job span hangs below the server\'s');
  const evalStages = workerSpans.filter((s) => s.parent_span_id === workerEval.span_id).map((s) => s.name);
  t.same(evalStages, ['eval.fetch', 'eval.evaluate', 'eval.closure'], 'the evaluation\'s stages, in order');

  for (const root of server.spans.filter((s) => s.name === 'server.build_job')) {
    t.equal(root.status, 'ok');
    const job = workerSpans.find((s) => s.name === 'worker.build_job' && s.parent_span_id === root.span_id);
    t.ok(job, `the worker's span of ${String(root.attributes['job_id'])}`);
    t.equal(job?.trace_id, root.trace_id);
    const stages = workerSpans.filter((s) => s.parent_span_id === job?.span_id);
    t.same(stages.map((s) => s.name), ['build.fetch_inputs', 'build.build', 'build.upload'], 'fetch inputs, build, upload');
    t.ok(stages.every((s) => s.trace_id === root.trace_id && s.status === 'ok'));
    // The server's side of the upload: each pushed path's ingest below the job's root, its stages below that.
    const ingests = server.spans.filter((s) => s.name === 'nar.ingest' && s.parent_span_id === root.span_id);
    t.ok(ingests.length >= 1, 'the pushed output\'s ingest hangs below the build job');
    for (const ingest of ingests) {
      t.match(ingest, { trace_id: root.trace_id, status: 'ok', process: 'server' });
      t.same(server.spans.filter((s) => s.parent_span_id === ingest.span_id).map((s) => s.name).filter((n) => n === 'nar.store'), ['nar.store']);
    }
  }
  t.notOk(server.spans.some((s) => s.trace_id === evalRoot.trace_id && s !== evalRoot), 'each job is its own trace');
});
