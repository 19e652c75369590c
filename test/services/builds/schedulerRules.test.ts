// The scheduler's bounded loops and waits against the real server, with a protocol-level worker
// (no Nix): build.inputsUnavailableMaxLoops, build.substituteMissEscalationThreshold and the
// cache.maxStorageGb wait of new evaluations (spec, "Build failure outcomes" and "Other transitions").
import t, { type Test } from 'tap';
import { jobFailure } from '../../../protocol/index.js';
import { openSecretBox } from '../../../storage/index.js';
import { cacheReadTokenOpens } from '../../../services/index.js';
import { startTestKiln, type TestKiln } from '../../support/kiln.js';
import type { TestCache } from '../../support/caches.js';
import { subscribedProject } from '../../support/subscribedProject.js';
import { handshake, testHello, type ProtoClient } from '../../support/protoClient.js';
import { derivationNode, narHash, type DerivationNodeFixture } from '../../support/derivationNodes.js';
import { eventually } from '../../support/eventually.js';

type Node = DerivationNodeFixture;

interface ActorNode { id: string; kind: string; state?: unknown; summary?: Record<string, unknown>; children?: ActorNode[] }
const find = (node: ActorNode, id: string): ActorNode | undefined =>
  node.id === id ? node : node.children?.map((c) => find(c, id)).find((n) => n !== undefined);
const findKind = (node: ActorNode, kind: string): ActorNode | undefined =>
  node.kind === kind ? node : node.children?.map((c) => findKind(c, kind)).find((n) => n !== undefined);

interface Setup { kiln: TestKiln; token: string; projectId: string; cache: TestCache; worker: ProtoClient }

async function setUp(t: Test, overrides: Parameters<typeof startTestKiln>[1]): Promise<Setup> {
  const kiln = await startTestKiln(t, { localWorker: true, 'build.retryBackoffSecs': 0, ...overrides });
  const { token, projectId, cache } = await subscribedProject(kiln);
  const worker = await handshake(`ws://127.0.0.1:${kiln.port}/proto`, testHello());
  t.teardown(() => worker.close());
  await worker.next('welcome');
  return { kiln, token, projectId, cache, worker };
}

/** Signs `n`'s output into the cache, as if uploaded earlier. */
async function putInCache(kiln: TestKiln, cache: TestCache, n: Node): Promise<void> {
  const hash = n.out.slice(11, 43);
  const [path] = await kiln.sql<{ id: string }[]>`
    insert into cached_paths (hash_part, store_path, nar_hash, nar_size, file_hash, file_size, listing)
    values (${hash}, ${n.out}, ${narHash()}, 100, ${narHash().slice(7)}, 90, '{}') returning id`;
  await kiln.sql`insert into path_signatures (cache_id, hash_part, cached_path_id, signature) values (${cache.id}, ${hash}, ${path!.id}, 'x:y')`;
}

async function evaluate(s: Setup, nodes: Node[], top: Node): Promise<string> {
  const evaluated = await s.kiln.api<string>('POST', `/tasks/${s.projectId}/default/evaluate`, { token: s.token, body: { commit: 'a'.repeat(40) } });
  const evalJob = await s.worker.next('evalJob');
  s.worker.send({ t: 'evalBatch', jobId: evalJob.jobId, derivations: nodes.map((n) => n.derivation), attributes: [{ path: ['packages', 'x86_64-linux', 'top'], drvPath: top.drvPath, outputs: { out: top.out } }], errors: [] });
  s.worker.send({ t: 'evalResult', jobId: evalJob.jobId, commit: 'a'.repeat(40), derivationCount: nodes.length, attributeCount: 1, errorCount: 0, durationMs: 1 });
  return evaluated.message;
}

const inputsMissing = (s: Setup, jobId: string) => s.worker.send({
  t: 'jobFailed', jobId, failure: jobFailure('inputs_unavailable', 'path is required, but there is no substituter that can build it'), durationMs: 1, logBytes: 0, logDroppedBytes: 0,
});
const succeed = (s: Setup, jobId: string, n: Node) => s.worker.send({
  t: 'buildResult', jobId, drvPath: n.drvPath, alreadyValid: false, durationMs: 1, logBytes: 0, logDroppedBytes: 0,
  outputs: [{ name: 'out', path: n.out, narHash: narHash(), narSize: 100, references: [], deriver: n.drvPath, ca: null }],
});

async function finalBuilds(s: Setup, evaluationId: string) {
  await eventually(async () => (await s.kiln.api<{ phase: string }>('GET', `/evals/${evaluationId}`, { token: s.token })).message,
    { until: (got) => got.phase === 'completed', timeout: 60_000, interval: 50, message: `evaluation ${evaluationId} completes` });
  return (await s.kiln.api<{ drv_path: string; status: string; attempts: number; failure: { reason: string } | null }[]>(
    'GET', `/evals/${evaluationId}/builds`, { token: s.token })).message;
}

t.test('a cache that claims an input the worker cannot fetch: free re-queues, then the input is built', async (t) => {
  const s = await setUp(t, { 'build.substituteMissEscalationThreshold': 2, 'build.inputsUnavailableMaxLoops': 3 });
  const dep = derivationNode('dep');
  const top = derivationNode('top', [dep.drvPath]);
  await putInCache(s.kiln, s.cache, dep);
  const progress: { builds_total: number; builds_done: number }[] = [];
  const buildProgress: { phase: string; bytes: number }[] = [];
  s.kiln.events.bus.subscribe((event) => {
    if (event.event === 'evaluation.progress') progress.push((JSON.parse(event.frame) as { content: { builds_total: number; builds_done: number } }).content);
    if (event.event === 'build.progress') buildProgress.push((JSON.parse(event.frame) as { content: { phase: string; bytes: number } }).content);
  });
  const evaluationId = await evaluate(s, [dep, top], top);

  // dep is substituted (its output is in the cache), so top goes first; twice the worker cannot fetch dep
  for (const round of [1, 2]) {
    const job = await s.worker.next('buildJob');
    if (round === 1) {
      // a dispatched job and the worker's connection are actors that operators can see
      s.worker.send({ t: 'jobAccepted', jobId: job.jobId });
      s.worker.send({ t: 'buildLog', jobId: job.jobId, seq: 0, data: Buffer.from('fetching inputs\n'), droppedBytes: 0 });
      const tree = await eventually(async () => (await s.kiln.api<ActorNode>('GET', '/admin/actors', { token: s.token })).message,
        { until: (got) => find(got, job.jobId)?.summary?.['progress'] === 16, interval: 20, message: 'the build job shows the 16 log bytes' });
      t.match(find(tree, job.jobId), { kind: 'build-job', state: 'running', summary: { kind: 'build', attempt: 1 } });
      t.match(find(tree, 'scheduler'), { kind: 'supervisor' });
      t.match(findKind(tree, 'worker-connection'), { state: 'working', summary: { jobs: 1 } });
    }
    t.equal(job.drvPath, top.drvPath, `round ${round}: top is dispatched while dep counts as substituted`);
    t.match(job.jobId, /:1$/, 'a free re-queue is not an attempt');
    const password = job.substituters[0]?.password ?? '';
    t.ok(cacheReadTokenOpens(await openSecretBox(s.kiln.sql, { baseDir: s.kiln.baseDir, 'secrets.cryptFile': null }), password, s.cache.id), 'the private cache comes with a read token');
    inputsMissing(s, job.jobId);
  }
  // past the threshold the cache's claim is not believed any more: dep is built, then top
  const depJob = await s.worker.next('buildJob');
  t.equal(depJob.drvPath, dep.drvPath, 'dep is built after two misses');
  succeed(s, depJob.jobId, dep);
  const topJob = await s.worker.next('buildJob');
  t.equal(topJob.drvPath, top.drvPath);
  succeed(s, topJob.jobId, top);

  const builds = await finalBuilds(s, evaluationId);
  const of = (n: Node) => builds.find((b) => b.drv_path === n.drvPath)!;
  t.match(of(dep), { status: 'completed', attempts: 1 });
  t.match(of(top), { status: 'completed', attempts: 1 });
  const [counts] = await s.kiln.sql<{ misses: number; loops: number }[]>`
    select (select substitute_misses from derivation_builds db join derivations d on d.id = db.derivation_id where d.drv_path = ${dep.drvPath}) as misses,
           (select input_loops from derivation_builds db join derivations d on d.id = db.derivation_id where d.drv_path = ${top.drvPath}) as loops`;
  t.same(counts, { misses: 2, loops: 2 });
  await eventually(() => progress.some((p) => p.builds_done === 2), { interval: 50, message: 'evaluation.progress counts both builds done' });
  t.match(progress.at(-1), { builds_total: 2, builds_done: 2 }, 'evaluation.progress counts the builds');
  t.match(buildProgress[0], { phase: 'building', bytes: 16 }, 'build.progress follows the log');
});

t.test('missing inputs are retried build.inputsUnavailableMaxLoops times, then the build fails', async (t) => {
  const s = await setUp(t, { 'build.inputsUnavailableMaxLoops': 2, 'build.maxAttempts': 1 });
  const top = derivationNode('top');
  const evaluationId = await evaluate(s, [top], top);
  for (let i = 0; i < 3; i++) inputsMissing(s, (await s.worker.next('buildJob')).jobId);
  const [build] = await finalBuilds(s, evaluationId);
  t.match(build, { status: 'failed', attempts: 1, failure: { reason: 'inputs_unavailable' } }, 'two free loops, then failed even with build.maxAttempts 1');
});

t.test('with cache.maxStorageGb, new evaluations wait while every writable cache is nearly full', async (t) => {
  const s = await setUp(t, { 'cache.maxStorageGb': 1 });
  const reasons: string[] = [];
  s.kiln.events.bus.subscribe((event) => {
    if (event.event !== 'evaluation.waiting') return;
    const { content } = JSON.parse(event.frame) as { content: { reason?: string } };
    if (content.reason) reasons.push(content.reason);
  });
  await s.kiln.sql`update caches set max_storage_bytes = ${5 * 1024 * 1024} where id = ${s.cache.id}`;
  const evaluated = await s.kiln.api<string>('POST', `/tasks/${s.projectId}/default/evaluate`, { token: s.token, body: { commit: 'b'.repeat(40) } });
  await eventually(async () => (await s.kiln.api<{ phase: string }>('GET', `/evals/${evaluated.message}`, { token: s.token })).message,
    { until: (got) => got.phase === 'waiting', interval: 50, message: 'the new evaluation waits for storage' });
  t.match(reasons, [/under 10 MiB of storage left/]);
  await s.kiln.sql`update caches set max_storage_bytes = null where id = ${s.cache.id}`;
  const job = await s.worker.next('evalJob');
  t.equal(job.commit, 'b'.repeat(40), 'dispatched once the cache has room');
});
