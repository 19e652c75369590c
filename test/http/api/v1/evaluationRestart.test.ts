// POST /evals/{id} {method: "restart"} (issue 23, docs/builds.md "Restarting"): a finished
// evaluation starts again as a new one of the same task, commit and attribute; its graph
// recording queues the failed builds it reaches again, with fresh attempts, which an ordinary
// evaluation never does (failed stays failed).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { PROTOCOL_VERSION, type MessageOf } from '../../../../protocol/index.js';
import { recordEvalBatch } from '../../../../services/builds/graphRecorder.js';
import { signUp } from '../../../support/accounts.js';
import { createFlakeRepo } from '../../../support/flakeRepo.js';
import { startTestKiln } from '../../../support/kiln.js';

const drvPath = (n: number) => `/nix/store/${String(n).repeat(32).slice(0, 32)}-thing${n}.drv`;
const node = (n: number) => ({
  drvPath: drvPath(n), name: `thing${n}`, outputs: { out: `/nix/store/${String(n).repeat(32).slice(0, 32)}-out${n}` }, inputDrvs: {}, inputSrcs: [],
  system: 'x86_64-linux', requiredSystemFeatures: [], timeoutSecs: null, maxSilentSecs: null, preferLocalBuild: false, fixedOutput: false,
});

t.test('restarting an evaluation', async (t) => {
  const kiln = await startTestKiln(t);
  await signUp(kiln, 'root');
  const ada = await signUp(kiln, 'ada');
  const eve = await signUp(kiln, 'eve');
  const dir = await mkdtemp(join(tmpdir(), 'kiln-restart-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const repo = createFlakeRepo(join(dir, 'flake'), { 'flake.nix': '{ outputs = _: { }; }\n' });
  await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } });
  t.equal((await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'web', repository: repo.url } })).status, 200);
  const started = await kiln.api<string>('POST', '/tasks/web/default/evaluate', { token: ada.token, body: { attr: 'packages.x86_64-linux.*' } });
  t.equal(started.status, 200);
  const first = started.message;

  const early = await kiln.api('POST', `/evals/${first}`, { token: ada.token, body: { method: 'restart' } });
  t.match(early, { status: 409, code: 'evaluation_unfinished', message: /only a completed, failed or aborted evaluation can be restarted/ });
  t.equal((await kiln.api('POST', `/evals/${first}`, { token: eve.token, body: { method: 'restart' } })).status, 404, 'another tenant sees no such evaluation');
  t.match(await kiln.api('POST', `/evals/${first}`, { token: ada.token, body: { method: 'again' } }), { status: 400, message: /method/ });

  t.equal((await kiln.api('POST', `/evals/${first}`, { token: ada.token, body: { method: 'abort' } })).status, 200);
  const restarted = await kiln.api<string>('POST', `/evals/${first}`, { token: ada.token, body: { method: 'restart' } });
  t.equal(restarted.status, 200, JSON.stringify(restarted.message));
  const second = restarted.message;
  t.not(second, first, 'a new evaluation');
  const view = await kiln.api<{ task: string; commit: string; attr: string; trigger: string; phase: string }>('GET', `/evals/${second}`, { token: ada.token });
  t.match(view.message, { task: 'default', commit: repo.commit, attr: 'packages.x86_64-linux.*', trigger: 'manual', phase: /^(queued|waiting)$/ });
  const [row] = await kiln.sql<{ restart_of: string; retry_failed: boolean }[]>`select restart_of, retry_failed from evaluations where id = ${second}`;
  t.same(row, { restart_of: first, retry_failed: true });

  // Two derivations failed earlier: the restart reaches one, an ordinary evaluation the other.
  const [thirdRow] = await kiln.sql<{ id: string }[]>`
    insert into evaluations (task_id, repository, commit, wildcard, phase) select task_id, repository, commit, wildcard, 'evaluating' from evaluations where id = ${first} returning id`;
  for (const n of [1, 2]) {
    const [drv] = await kiln.sql<{ id: string }[]>`
      insert into derivations (drv_path, name, system, outputs) values (${drvPath(n)}, ${`thing${n}`}, 'x86_64-linux', '{}') returning id`;
    await kiln.sql`
      insert into derivation_builds (derivation_id, status, attempts, failure_class, failure_reason, failure_message, finished_at)
      values (${drv!.id}, 'failed', 3, 'FailedPermanent', 'builder_failed', 'exit 1', now())`;
  }
  await kiln.sql`update evaluations set phase = 'evaluating' where id = ${second}`;
  const batch = (n: number): MessageOf<'evalBatch'> => ({ v: PROTOCOL_VERSION, t: 'evalBatch', jobId: `eval:${n}`, derivations: [node(n)], attributes: [], errors: [] });
  await recordEvalBatch(kiln.events.events, second, batch(1));
  await recordEvalBatch(kiln.events.events, thirdRow!.id, batch(2));
  const status = async (n: number) => (await kiln.sql<{ status: string; attempts: number; failure_class: string | null }[]>`
    select db.status, db.attempts, db.failure_class from derivation_builds db join derivations d on d.id = db.derivation_id where d.drv_path = ${drvPath(n)}`)[0];
  t.same(await status(1), { status: 'queued', attempts: 0, failure_class: null }, 'the restart queues the failed build it reaches, with fresh attempts');
  t.same(await status(2), { status: 'failed', attempts: 3, failure_class: 'FailedPermanent' }, 'an ordinary evaluation leaves a failed build failed');
});
