// The worker in-process (startWorker) with real git and Nix against the test server: the same
// paths as the process test, kept short, so the job code counts for coverage.
import t from 'tap';
import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Outgoing } from '../../protocol/index.js';
import { createFlakeRepo, testFlake } from '../support/flakeRepo.js';
import { startInProcessWorker } from '../support/inProcessWorker.js';
import { requireNix, tempDir } from '../support/nixStore.js';

requireNix();
const PROJECT = randomUUID();
const dir = tempDir('kiln-worker-jobs-');
const repo = createFlakeRepo(join(dir, 'repo'), { 'flake.nix': testFlake(randomUUID()) });

t.test('eval, build, push and cancel in one in-process worker', async (t) => {
  const { worker, session } = await startInProcessWorker(t, dir, {
    'worker.system.features': ['kvm'], 'worker.build.maxCores': 1, 'worker.environmentVariables': { KILN_TEST_UNSET: null, KILN_TEST: 'yes' },
  });
  t.equal(session.hello.workerId, worker.id);
  t.same(session.hello.systemFeatures, ['kvm']);

  session.send({ t: 'evalJob', project: PROJECT, jobId: 'e', repository: repo.url, commit: repo.commit, attributes: 'packages.x86_64-linux.base, packages.x86_64-linux.broken, packages.x86_64-linux.notADerivation', timeoutSecs: 60 });
  const evaluated = await session.evalOutcome('e');
  t.equal(evaluated.final.t, 'evalResult');
  t.ok(existsSync(join(dir, 'worker/eval-cache/nix')), 'worker.eval.cache.dir null: Nix\'s caches of the evaluation are under <worker.baseDir>/eval-cache');
  const attributes = evaluated.batches.flatMap((b) => b.attributes);
  t.same(attributes.map((a) => a.path[2]).sort(), ['base', 'broken'], 'a selected string is skipped');
  const drv = (name: string) => attributes.find((a) => a.path[2] === name)!.drvPath;

  session.send({ t: 'buildJob', jobId: 'b', drvPath: drv('base'), substituters: [], targetCaches: ['main'], timeoutSecs: 60, maxSilentSecs: 60 });
  const built = await session.buildOutcome('b');
  t.equal(built.final.t, 'buildResult', built.final.t === 'jobFailed' ? built.final.failure.message : '');
  const out = built.final.t === 'buildResult' ? built.final.outputs[0]! : undefined;
  t.ok(out && session.nars.has(out.path), 'the output arrived as a NAR');

  session.send({ t: 'buildJob', jobId: 'x', drvPath: drv('broken'), substituters: [], targetCaches: ['main'], timeoutSecs: 0, maxSilentSecs: 0 });
  const broken = await session.outcome('x');
  t.match(broken, { t: 'jobFailed', failure: { class: 'FailedPermanent', reason: 'builder_failed' } });

  session.send({ t: 'pushJob', jobId: 'p', paths: [drv('base')], targetCaches: ['main'] });
  t.match(await session.outcome('p'), { t: 'pushResult', paths: [{ path: drv('base'), status: 'stored' }] }, 'the .drv pushed on request');
  session.send({ t: 'pushJob', jobId: 'q', paths: ['/nix/store/00000000000000000000000000000000-missing'], targetCaches: ['main'] });
  t.match(await session.outcome('q'), { t: 'jobFailed', failure: { reason: 'inputs_unavailable' } });

  session.send({ t: 'buildJob', jobId: 'missing-drv', drvPath: '/nix/store/00000000000000000000000000000000-missing.drv', substituters: [], targetCaches: [], timeoutSecs: 0, maxSilentSecs: 0 });
  t.match(await session.outcome('missing-drv'), { t: 'jobFailed', failure: { class: 'FailedTransient', reason: 'inputs_unavailable', message: /no substituter/ } });

  session.send({ t: 'evalJob', project: PROJECT, jobId: 'bad-wildcard', repository: repo.url, commit: repo.commit, attributes: '!packages', timeoutSecs: 0 });
  t.match(await session.outcome('bad-wildcard'), { t: 'jobFailed', failure: { reason: 'eval_error', message: /wildcard is invalid/ } });

  session.send({ t: 'cancelJob', jobId: 'nothing', reason: 'test' });
  t.match(await session.next('error'), { code: 'unknown_job', jobId: 'nothing' });
  const twice: Outgoing = { t: 'buildJob', jobId: 'twice', drvPath: drv('base'), substituters: [], targetCaches: [], timeoutSecs: 0, maxSilentSecs: 0 };
  session.send(twice);
  session.send(twice);
  t.match(await session.next('jobRefused', 'twice'), { refusal: 'duplicate' }, 'a job id already running is refused');
  t.match(await session.outcome('twice'), { t: 'buildResult', alreadyValid: true });
  // Roots go after the result is sent; by now build b's are long gone.
  t.same(readdirSync(join(dir, 'gcroots')).filter((name) => name.startsWith('job-b')), [], 'a finished job leaves no GC roots');
});
