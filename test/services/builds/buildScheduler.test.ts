// The scheduler against the real server, with a protocol-level worker (no Nix): dependency order,
// a FailedTransient retry, a job the worker gives back after taking it, a final FailedTimeout, a derivation substituted because its output is
// already in a subscribed cache, logs stored in chunks, and the evaluation completing.
import t from 'tap';
import { jobFailure, type Outgoing } from '../../../protocol/index.js';
import { startTestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { subscribedProject } from '../../support/subscribedProject.js';
import { handshake, testHello } from '../../support/protoClient.js';
import { derivationNode, narHash, type DerivationNodeFixture } from '../../support/derivationNodes.js';
import { eventually } from '../../support/eventually.js';

t.test('dispatch order, retries, substitution and logs', async (t) => {
  const kiln = await startTestKiln(t, { localWorker: true, 'build.retryBackoffSecs': 0, 'build.maxAttempts': 3, 'log.chunkBytes': 16 });
  const seen: string[] = [];
  kiln.events.bus.subscribe((event) => seen.push(event.event));
  const { token, projectId, cache } = await subscribedProject(kiln);

  const dep = derivationNode('dep');
  const top = derivationNode('top', [dep.drvPath]);
  const cached = derivationNode('cached');
  // the cached derivation's output is already signed into the subscribed cache
  const cachedHash = cached.out.slice(11, 43);
  const [path] = await kiln.sql<{ id: string }[]>`
    insert into cached_paths (hash_part, store_path, nar_hash, nar_size, file_hash, file_size, listing)
    values (${cachedHash}, ${cached.out}, ${narHash()}, 100, ${narHash().slice(7)}, 90, '{}') returning id`;
  await kiln.sql`insert into path_signatures (cache_id, hash_part, cached_path_id, signature) values (${cache.id}, ${cachedHash}, ${path!.id}, 'x:y')`;

  const worker = await handshake(`ws://127.0.0.1:${kiln.port}/proto`, testHello());
  t.teardown(() => worker.close());
  await worker.next('welcome');
  const evaluated = await kiln.api<string>('POST', `/tasks/${projectId}/default/evaluate`, { token, body: { commit: 'a'.repeat(40) } });
  t.equal(evaluated.status, 200, String(evaluated.message));
  const evaluationId = evaluated.message;

  const evalJob = await worker.next('evalJob');
  t.equal(evalJob.commit, 'a'.repeat(40));
  t.equal(evalJob.attributes, 'packages.x86_64-linux.*');
  const attribute = (name: string, n: DerivationNodeFixture) => ({ path: ['packages', 'x86_64-linux', name], drvPath: n.drvPath, outputs: { out: n.out } });
  worker.send({ t: 'evalBatch', jobId: evalJob.jobId, derivations: [dep.derivation, top.derivation, cached.derivation], attributes: [], errors: [] });
  worker.send({ t: 'evalBatch', jobId: evalJob.jobId, derivations: [], attributes: [attribute('top', top), attribute('cached', cached)], errors: [] });
  worker.send({ t: 'evalResult', jobId: evalJob.jobId, commit: 'a'.repeat(40), derivationCount: 3, attributeCount: 2, errorCount: 0, durationMs: 5 });

  const output = (n: DerivationNodeFixture) => ({ name: 'out', path: n.out, narHash: narHash(), narSize: 100, references: [], deriver: n.drvPath, ca: null });
  const finish = (jobId: string, drv: string, body: Omit<Outgoing<'buildResult'>, 't' | 'jobId' | 'drvPath'> | null, reason?: 'network' | 'timeout') => {
    if (body) worker.send({ t: 'buildResult', jobId, drvPath: drv, ...body });
    else worker.send({ t: 'jobFailed', jobId, failure: jobFailure(reason!, `${reason} happened`), durationMs: 1, logBytes: 0, logDroppedBytes: 0 });
  };

  // dep first (top waits for it); a transient failure is retried with a new attempt
  const first = await worker.next('buildJob');
  t.equal(first.drvPath, dep.drvPath);
  t.same(first.targetCaches, ['main']);
  t.match(first.substituters, [{ url: /\/cache\/main$/, publicKeys: [cache.publicKey] }]);
  worker.send({ t: 'jobAccepted', jobId: first.jobId });
  worker.send({ t: 'buildLog', jobId: first.jobId, seq: 0, data: Buffer.from('attempt one\n'), droppedBytes: 0 });
  finish(first.jobId, dep.drvPath, null, 'network');
  const retry = await worker.next('buildJob');
  t.equal(retry.drvPath, dep.drvPath);
  t.match(retry.jobId, /:2$/);
  worker.send({ t: 'buildLog', jobId: retry.jobId, seq: 0, data: Buffer.from('line one of two\nline two of two\n'), droppedBytes: 0 });
  finish(retry.jobId, dep.drvPath, { outputs: [output(dep)], alreadyValid: false, durationMs: 1, logBytes: 32, logDroppedBytes: 0 });

  // then top: taken, then given back (the worker's store holds paths the job may not use that
  // another build still uses: docs/builds.md, "The shared store"): queued again, not failed
  const givenBack = await worker.next('buildJob');
  t.equal(givenBack.drvPath, top.drvPath);
  worker.send({ t: 'jobAccepted', jobId: givenBack.jobId });
  worker.send({ t: 'jobRefused', jobId: givenBack.jobId, refusal: 'busy', message: 'in use by another build' });
  // a timeout is final
  const topJob = await worker.next('buildJob');
  t.equal(topJob.drvPath, top.drvPath, 'dispatched again after the refusal');
  finish(topJob.jobId, top.drvPath, null, 'timeout');

  await eventually(async () => (await kiln.api<{ phase: string }>('GET', `/evals/${evaluationId}`, { token })).message,
    { until: (got) => got.phase === 'completed', interval: 50, message: 'the evaluation completes' });
  const builds = (await kiln.api<{ build_id: string; drv_path: string; status: string; attempts: number; failure: { class: string } | null }[]>(
    'GET', `/evals/${evaluationId}/builds`, { token })).message;
  const of = (n: DerivationNodeFixture) => builds.find((b) => b.drv_path === n.drvPath)!;
  t.match(of(dep), { status: 'completed', attempts: 2 });
  // `attempts` counts dispatches, the given-back one too (docs/builds.md, "Declined builds": it spent
  // no attempt, buildDeclines.test); it failed nothing
  t.match(of(top), { status: 'failed', attempts: 2, failure: { class: 'FailedTimeout' } });
  t.match(of(cached), { status: 'substituted', attempts: 0 });

  const log = await fetch(`${kiln.url}/api/v1/builds/${of(dep).build_id}/log`, { headers: { authorization: `Bearer ${token}` } });
  t.equal(await log.text(), 'line one of two\nline two of two\n', 'the latest attempt\'s log');
  t.equal(log.headers.get('x-content-type-options'), 'nosniff', 'a build\'s log text is never sniffed into HTML');
  const chunks = await kiln.sql`select seq from build_log_chunks where derivation_build_id = (select derivation_build_id from builds where id = ${of(dep).build_id}) and attempt = 2`;
  t.equal(chunks.length, 2, 'split at a line end past log.chunkBytes');

  const entry = (await kiln.api<{ attr: string; build_status: string }[]>('GET', `/tasks/${projectId}/default/entry-points?evaluation_id=${evaluationId}`, { token })).message;
  t.same(entry.map((e) => [e.attr, e.build_status]), [['packages.x86_64-linux.cached', 'substituted'], ['packages.x86_64-linux.top', 'failed']]);

  const phases = ['evaluation.queued', 'evaluation.evaluating', 'evaluation.building', 'evaluation.completed'];
  t.same(seen.filter((e) => phases.includes(e)), phases);
  t.ok(seen.includes('build.substituted') && seen.includes('build.failed') && seen.includes('build.completed'), 'build events');
  t.ok(seen.includes('worker.connected') && seen.includes('worker.job_dispatched'), 'worker events');
});

t.test('bad requests name the problem', async (t) => {
  const kiln = await startTestKiln(t);
  const { token } = await signUp(kiln, 'bob');
  const missing = await kiln.api('GET', `/evals/${'0'.repeat(8)}-0000-4000-8000-${'0'.repeat(12)}`, { token });
  t.match(missing, { status: 404, code: 'not_found' });
  const notUuid = await kiln.api('GET', '/evals/xyz', { token });
  t.match(notUuid, { status: 400, code: 'invalid_parameter' });
  await kiln.api('PUT', '/orgs', { token, body: { name: 'bobs' } });
  await kiln.api('PUT', '/projects/bobs', { token, body: { name: 'p', repository: 'file:///nonexistent' } });
  const badCommit = await kiln.api('POST', '/tasks/p/default/evaluate', { token, body: { commit: 'main' } });
  t.match(badCommit, { status: 400, code: 'invalid_body' });
  const noRepo = await kiln.api('POST', '/projects/bobs/p/evaluate', { token });
  t.match(noRepo, { status: 422, code: 'repository_unavailable' });
});
