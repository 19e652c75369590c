// Build memory reservations (worker.build.cgroup: "the scheduler reserves the larger of predicted
// and reported peak"; docs/builds.md, "Memory reservations") on the real server and database with a
// protocol-level worker (no Nix): a build's prediction is the largest recent peak of its derivation
// name, a running build holds the larger of its prediction and its heartbeat's peak, a worker takes
// a build only while its memory less what it holds covers the prediction, and an idle one always may.
import t from 'tap';
import { startTestKiln, type TestKiln } from '../../support/kiln.js';
import { subscribedProject } from '../../support/subscribedProject.js';
import { handshake, testHello, type ProtoClient } from '../../support/protoClient.js';
import { derivationNode, narHash, type DerivationNodeFixture } from '../../support/derivationNodes.js';
import { eventually } from '../../support/eventually.js';
import { PeakMemoryHistory } from '../../../services/builds/memoryReservations.js';

type Node = DerivationNodeFixture;
const MB = 1_000_000;
const resources = (peakMemoryBytes: number) => ({ cpuUserSeconds: 1, cpuSystemSeconds: 0, peakMemoryBytes, ioReadBytes: 0, ioWriteBytes: 0, oomKills: 0 });

t.test('the scheduler reserves the larger of predicted and reported peak memory on each worker', async (t) => {
  const kiln: TestKiln = await startTestKiln(t, { localWorker: true, 'build.retryBackoffSecs': 0 });
  const { token, projectId } = await subscribedProject(kiln);
  // 1000 MB and four build slots: the slots never stop a build here, memory does
  const worker: ProtoClient = await handshake(`ws://127.0.0.1:${kiln.port}/proto`, testHello({ memoryBytes: 1000 * MB, maxConcurrentBuilds: 4 }));
  t.teardown(() => worker.close());
  await worker.next('welcome');

  const evaluate = async (nodes: Node[]) => {
    const evaluated = await kiln.api<string>('POST', `/tasks/${projectId}/default/evaluate`, { token, body: { commit: 'a'.repeat(40) } });
    const evalJob = await worker.next('evalJob');
    worker.send({ t: 'evalBatch', jobId: evalJob.jobId, derivations: nodes.map((n) => n.derivation),
      attributes: nodes.map((n, i) => ({ path: ['packages', 'x86_64-linux', `n${i}`], drvPath: n.drvPath, outputs: { out: n.out } })), errors: [] });
    worker.send({ t: 'evalResult', jobId: evalJob.jobId, commit: 'a'.repeat(40), derivationCount: nodes.length, attributeCount: nodes.length, errorCount: 0, durationMs: 1 });
    await eventually(async () => (await kiln.api<{ phase: string }>('GET', `/evals/${evaluated.message}`, { token })).message,
      { until: (e) => e.phase !== 'queued' && e.phase !== 'evaluating', interval: 20, message: 'the evaluation is building' });
  };
  const succeed = (jobId: string, n: Node, peak: number) => worker.send({
    t: 'buildResult', jobId, drvPath: n.drvPath, alreadyValid: false, durationMs: 1, logBytes: 0, logDroppedBytes: 0, resources: resources(peak),
    outputs: [{ name: 'out', path: n.out, narHash: narHash(), narSize: 100, references: [], deriver: n.drvPath, ca: null }],
  });
  const status = async (n: Node) => (await kiln.sql<{ status: string }[]>`
    select db.status from derivation_builds db join derivations d on d.id = db.derivation_id where d.drv_path = ${n.drvPath}`)[0]?.status;

  // a first "big" finishes at 600 MB: builds named "big" are predicted to peak at 600 MB
  const big1 = derivationNode('big');
  await evaluate([big1]);
  const big1Job = await worker.next('buildJob');
  succeed(big1Job.jobId, big1, 600 * MB);

  // an unknown build runs and its heartbeat reports 500 MB: 1000 − 500 < 600, the next "big" waits
  const mystery = derivationNode('mystery');
  await evaluate([mystery]);
  const mysteryJob = await worker.next('buildJob');
  t.equal(mysteryJob.drvPath, mystery.drvPath, 'a build with no prediction goes to the idle worker');
  worker.send({ t: 'heartbeat', seq: 1, load: { runningBuilds: 1, runningEvals: 0, load1: 0, memoryFreeBytes: 500 * MB, memoryTotalBytes: 1000 * MB, storeFreeBytes: null },
    builds: [{ jobId: mysteryJob.jobId, wallSeconds: 1, memoryBytes: 500 * MB, ...resources(500 * MB) }] });
  await eventually(async () => (await kiln.sql`select 1 from build_resource_samples where running and peak_memory_bytes = ${500 * MB}`).length > 0,
    { interval: 20, message: 'the heartbeat\'s reading is recorded' });
  const big2 = derivationNode('big');
  await evaluate([big2]);
  await kiln.scheduler.passNow();
  t.equal(await status(big2), 'queued', 'a build predicted at 600 MB waits while the worker holds a reported 500 MB of its 1000 MB');

  // the unknown build ends: the worker holds nothing and takes the waiting "big"
  succeed(mysteryJob.jobId, mystery, 500 * MB);
  const big2Job = await worker.next('buildJob');
  t.equal(big2Job.drvPath, big2.drvPath, 'the waiting build goes once the memory is free');
  succeed(big2Job.jobId, big2, 600 * MB);

  // two "big" builds ready together: the first holds its predicted 600 MB, the second waits for it
  const big3 = derivationNode('big');
  const big4 = derivationNode('big');
  await evaluate([big3, big4]);
  const first = await worker.next('buildJob');
  await kiln.scheduler.passNow();
  const [second] = [big3, big4].filter((n) => n.drvPath !== first.drvPath);
  t.equal(await status(second!), 'queued', 'the second waits while the first holds its predicted 600 MB');
  // a predicted peak beyond the whole worker: it still builds, alone, rather than never
  succeed(first.jobId, first.drvPath === big3.drvPath ? big3 : big4, 1500 * MB);
  const secondJob = await worker.next('buildJob');
  t.equal(secondJob.drvPath, second!.drvPath, 'a build predicted above the worker\'s memory runs on the idle worker');
  const huge = derivationNode('big');
  await evaluate([huge]);
  await kiln.scheduler.passNow();
  t.equal(await status(huge), 'queued', 'while a build runs, one predicted at 1500 MB waits');
  succeed(secondJob.jobId, second!, 100 * MB);
  t.equal((await worker.next('buildJob')).drvPath, huge.drvPath, 'and goes once the worker is idle');

  // a process that starts (or restarts) learns the predictions from the stored samples
  const history = new PeakMemoryHistory();
  await history.warm(kiln.sql);
  t.equal(history.predicted('big'), 1500 * MB, 'the stored samples give "big" its largest recent peak');
  t.equal(history.predicted('mystery'), 500 * MB);
  t.equal(history.predicted('never-built'), null, 'a name never measured has no prediction');
});
