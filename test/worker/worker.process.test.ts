// End to end: a real `kiln worker` process against the /proto test server, with real git and
// real Nix 2.8. Evaluates a flake made here, builds its derivations, receives their NARs.
import t from 'tap';
import { randomBytes, randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { toNix32Hash, type MessageOf } from '../../protocol/index.js';
import { createFlakeRepo, testFlake } from '../support/flakeRepo.js';
import { nixPathInfo, requireNix, tempDir } from '../support/nixStore.js';
import { startProtoServer } from '../support/protoServer.js';
import { spawnWorker } from '../support/workerProcess.js';

requireNix();

const project = randomUUID();
const token = randomBytes(48).toString('base64url');
const dir = tempDir('kiln-worker-e2e-');
const repo = createFlakeRepo(join(dir, 'repo'), { 'flake.nix': testFlake(randomUUID()) });
const peersFile = join(dir, 'peers');
writeFileSync(peersFile, `# peer tokens of this worker\n${project}:${token}\n`);

t.test('a worker evaluates, builds and pushes; failures are classified', async (t) => {
  const server = await startProtoServer({ tokens: { [project]: [token] } });
  const worker = spawnWorker({ serverUrl: server.url, baseDir: join(dir, 'worker'), peersFile, args: ['--build-max-concurrent', '4'] });
  t.teardown(async () => {
    await worker.stop();
    await server.close();
  });

  const session = await server.nextWorker();
  t.test('handshake: the hello describes the worker, the token authorises the project', async (t) => {
    t.match(session.hello.workerId, /^[0-9a-f-]{36}$/);
    t.same(session.hello.capabilities, { eval: true, build: true, fetch: true, federate: false });
    t.ok(session.hello.architectures.includes('x86_64-linux'));
    t.equal(session.hello.maxConcurrentBuilds, 4);
    t.equal(session.hello.open, false);
    t.same(session.projects, [project]);
    const beat = await session.next('heartbeat');
    t.equal(beat.load.runningBuilds, 0);
    t.ok(beat.load.memoryTotalBytes > 0, 'heartbeats carry load metrics');
  });

  const drvs = new Map<string, string>();
  t.test('evaluation: wildcard, exclusion, attribute errors and the derivation graph', async (t) => {
    session.send({ t: 'evalJob', project, jobId: 'eval-1', repository: repo.url, commit: repo.commit, attributes: 'packages.x86_64-linux.*, !packages.x86_64-linux.skipped', timeoutSecs: 120 });
    t.equal((await session.next('jobAccepted', 'eval-1')).jobId, 'eval-1');
    const { batches, final } = await session.evalOutcome('eval-1');
    t.equal(final.t, 'evalResult', final.t === 'jobFailed' ? final.failure.message : 'evaluated');
    const derivations = batches.flatMap((b) => b.derivations);
    const attributes = batches.flatMap((b) => b.attributes);
    const errors = batches.flatMap((b) => b.errors);
    t.same(attributes.map((a) => a.path.join('.')).sort(), ['app', 'base', 'broken', 'quiet', 'slow'].map((n) => `packages.x86_64-linux.${n}`));
    t.same(errors.map((e) => e.path.join('.')), ['packages.x86_64-linux.bad']);
    t.match(errors[0]?.message, /this attribute does not evaluate/);
    t.notOk(JSON.stringify(batches).includes('never evaluated'), 'the excluded attribute was not evaluated');
    if (final.t === 'evalResult') {
      t.equal(final.derivationCount, derivations.length);
      t.equal(final.attributeCount, 5);
      t.equal(final.errorCount, 1);
      t.equal(final.commit, repo.commit);
    }
    for (const a of attributes) drvs.set(a.path[2]!, a.drvPath);
    const app = derivations.find((d) => d.drvPath === drvs.get('app'))!;
    const base = derivations.find((d) => d.drvPath === drvs.get('base'))!;
    t.same(Object.keys(app.inputDrvs), [base.drvPath], 'app depends on base');
    t.same(app.inputDrvs[base.drvPath], ['out']);
    t.ok(derivations.indexOf(base) < derivations.indexOf(app), 'dependencies come first');
    t.equal(app.system, 'x86_64-linux');
    t.equal(app.name, 'kiln-test-app');
    t.match(app.outputs['out'], /^\/nix\/store\/[a-z0-9]{32}-kiln-test-app$/);
    t.equal(derivations.length, 5, 'five derivations, no duplicates');
  });

  t.test('builds: outputs pushed as NARs whose NarHash matches nix path-info', async (t) => {
    const build = async (name: string, jobId: string) => {
      session.send({ t: 'buildJob', jobId, drvPath: drvs.get(name)!, substituters: [], targetCaches: ['main'], timeoutSecs: 0, maxSilentSecs: 0 });
      return session.buildOutcome(jobId);
    };
    const base = await build('base', 'build-base');
    t.equal(base.final.t, 'buildResult', base.final.t === 'jobFailed' ? base.final.failure.message : '');
    t.match(base.log, /building base/);
    const app = await build('app', 'build-app');
    t.equal(app.final.t, 'buildResult', app.final.t === 'jobFailed' ? app.final.failure.message : '');
    for (const result of [base.final, app.final] as MessageOf<'buildResult'>[]) {
      const out = result.outputs.find((o) => o.name === 'out')!;
      const info = nixPathInfo(out.path);
      t.equal(out.narSize, info.narSize, `${out.path} NarSize`);
      const nar = session.nars.get(out.path);
      t.ok(nar, `the NAR of ${out.path} arrived`);
      // What the test server hashed must be what Nix registered (path-info prints SRI, /proto nix32).
      t.equal(nar?.narHash, toNix32Hash(info.narHash), 'the NAR received hashes to the NarHash of nix path-info');
      t.equal(out.narHash, nar?.narHash, 'and the build result announces the same');
      t.equal(nar?.bytes.length, info.narSize);
      t.equal(out.deriver, result.drvPath);
    }
    const appOut = (app.final as MessageOf<'buildResult'>).outputs[0]!;
    const baseOut = (base.final as MessageOf<'buildResult'>).outputs[0]!;
    t.same(appOut.references, [baseOut.path], 'app refers to base');

    const again = await build('base', 'build-base-again');
    t.equal(again.final.t, 'buildResult');
    t.equal((again.final as MessageOf<'buildResult'>).alreadyValid, true, 'a second build finds the outputs valid');
  });

  t.test('a builder that exits non-zero is FailedPermanent, with its log', async (t) => {
    session.send({ t: 'buildJob', jobId: 'build-broken', drvPath: drvs.get('broken')!, substituters: [], targetCaches: ['main'], timeoutSecs: 0, maxSilentSecs: 0 });
    const { log, final } = await session.buildOutcome('build-broken');
    t.equal(final.t, 'jobFailed');
    if (final.t !== 'jobFailed') return;
    t.equal(final.failure.class, 'FailedPermanent');
    t.equal(final.failure.reason, 'builder_failed');
    t.equal(final.failure.exitCode, 3);
    t.match(final.failure.message, /failed with exit code 3/);
    t.match(log, /about to fail/);
  });

  t.test('timeouts are FailedTimeout: total time and silence', async (t) => {
    session.send({ t: 'buildJob', jobId: 'build-slow', drvPath: drvs.get('slow')!, substituters: [], targetCaches: [], timeoutSecs: 1, maxSilentSecs: 0 });
    session.send({ t: 'buildJob', jobId: 'build-quiet', drvPath: drvs.get('quiet')!, substituters: [], targetCaches: [], timeoutSecs: 0, maxSilentSecs: 1 });
    const slow = await session.buildOutcome('build-slow');
    const quiet = await session.buildOutcome('build-quiet');
    t.equal(slow.final.t === 'jobFailed' && slow.final.failure.class, 'FailedTimeout');
    t.equal(slow.final.t === 'jobFailed' && slow.final.failure.reason, 'timeout');
    t.match(slow.log, /slow starts/);
    t.equal(quiet.final.t === 'jobFailed' && quiet.final.failure.class, 'FailedTimeout');
    t.equal(quiet.final.t === 'jobFailed' && quiet.final.failure.reason, 'max_silent');
  });

  t.test('a cancelled build ends as cancelled', async (t) => {
    session.send({ t: 'buildJob', jobId: 'build-cancel', drvPath: drvs.get('slow')!, substituters: [], targetCaches: [], timeoutSecs: 0, maxSilentSecs: 0 });
    await session.next('jobAccepted', 'build-cancel');
    await session.next('buildLog', 'build-cancel');
    session.send({ t: 'cancelJob', jobId: 'build-cancel', reason: 'test' });
    const final = await session.outcome('build-cancel');
    t.equal(final.t === 'jobFailed' && final.failure.reason, 'cancelled');
  });

  t.test('an unknown commit is FailedPermanent; a missing repository FailedTransient', async (t) => {
    session.send({ t: 'evalJob', project, jobId: 'eval-nocommit', repository: repo.url, commit: 'f'.repeat(40), attributes: 'packages.*.*', timeoutSecs: 60 });
    const missingCommit = await session.outcome('eval-nocommit');
    t.equal(missingCommit.t === 'jobFailed' && missingCommit.failure.reason, 'commit_not_found');
    // Another project: this one's clone already holds the commit (clones are per project, not per URL).
    session.send({ t: 'evalJob', project: randomUUID(), jobId: 'eval-norepo', repository: `file://${dir}/nowhere`, commit: repo.commit, attributes: 'packages.*.*', timeoutSecs: 60 });
    const missingRepo = await session.outcome('eval-norepo');
    t.equal(missingRepo.t === 'jobFailed' && missingRepo.failure.class, 'FailedTransient');
    t.equal(missingRepo.t === 'jobFailed' && missingRepo.failure.reason, 'fetch_failed');
  });

  t.test('the worker refuses what it cannot take', async (t) => {
    session.send({ t: 'evalJob', project, jobId: 'eval-a', repository: repo.url, commit: repo.commit, attributes: 'packages.x86_64-linux.base', timeoutSecs: 60 });
    session.send({ t: 'evalJob', project, jobId: 'eval-b', repository: repo.url, commit: repo.commit, attributes: 'packages.x86_64-linux.base', timeoutSecs: 60 });
    const refused = await session.next('jobRefused', 'eval-b');
    t.equal(refused.refusal, 'busy', 'worker.eval.maxConcurrent is 1');
    t.equal((await session.outcome('eval-a')).t, 'evalResult');
  });

  t.test('garbage from the server: the worker closes with a reason and reconnects', async (t) => {
    session.sendRaw(Buffer.from([0xc1, 0x00, 0xff]));
    const closed = await session.closed;
    t.equal(closed.code, 4002);
    t.match(closed.reason, /^malformed_message: frame: not a MessagePack value/);
    const again = await server.nextWorker();
    t.equal(again.hello.workerId, session.hello.workerId, 'the same worker id after reconnecting');
    const retry = await worker.waitForLog((l) => l.msg === 'reconnecting after a delay');
    t.ok(Number(retry['delayMs']) <= 1000, 'the first reconnect waits at most the base delay');
  });
});
