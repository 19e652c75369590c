// The scheduler starts placed builds one start transaction at a time (buildPlacement.ts): builds
// placed while one is under way go into the next, so passes woken build by build (a freed slot
// each) still start their builds in batches (issue 23). Real server and PostgreSQL, protocol-level
// worker (no Nix): a start transaction is held under way by a lock on the outbox its durable event
// is written to, and a build made ready meanwhile is started only after it.
import t from 'tap';
import { startTestKiln } from '../../support/kiln.js';
import { subscribedProject } from '../../support/subscribedProject.js';
import { handshake, testHello, type ProtoClient } from '../../support/protoClient.js';
import { derivationNode, narHash, type DerivationNodeFixture } from '../../support/derivationNodes.js';
import { eventually } from '../../support/eventually.js';

const succeed = (worker: ProtoClient, jobId: string, n: DerivationNodeFixture) => worker.send({
  t: 'buildResult', jobId, drvPath: n.drvPath, alreadyValid: false, durationMs: 1, logBytes: 0, logDroppedBytes: 0,
  outputs: [{ name: 'out', path: n.out, narHash: narHash(), narSize: 100, references: [], deriver: n.drvPath, ca: null }],
});

interface Node { id: string; state?: unknown; children?: Node[] }
const find = (node: Node, id: string): Node | undefined => node.id === id ? node : (node.children ?? []).map((c) => find(c, id)).find(Boolean);

t.test('a build placed while a start transaction is under way is started after it, in the next', async (t) => {
  const kiln = await startTestKiln(t, { localWorker: true });
  const { token, projectId } = await subscribedProject(kiln);
  const worker = await handshake(`ws://127.0.0.1:${kiln.port}/proto`, testHello({ maxConcurrentBuilds: 8 }));
  t.teardown(() => worker.close());
  await worker.next('welcome');

  // r and p are leaves; a (an entry point: its build.started is durable) waits for r, b for p.
  const r = derivationNode('r');
  const p = derivationNode('p');
  const a = derivationNode('a', [r.drvPath]);
  const b = derivationNode('b', [p.drvPath]);
  const top = derivationNode('top', [a.drvPath, b.drvPath]);
  const attribute = (name: string, n: DerivationNodeFixture) => ({ path: ['packages', 'x86_64-linux', name], drvPath: n.drvPath, outputs: { out: n.out } });
  const evaluated = await kiln.api<string>('POST', `/tasks/${projectId}/default/evaluate`, { token, body: { commit: 'a'.repeat(40) } });
  t.equal(evaluated.status, 200, String(evaluated.message));
  const evalJob = await worker.next('evalJob');
  worker.send({ t: 'evalBatch', jobId: evalJob.jobId, derivations: [r, p, a, b, top].map((n) => n.derivation), attributes: [attribute('a', a), attribute('top', top)], errors: [] });
  worker.send({ t: 'evalResult', jobId: evalJob.jobId, commit: 'a'.repeat(40), derivationCount: 5, attributeCount: 2, errorCount: 0, durationMs: 1 });
  const leaves = new Map<string, string>();
  for (let i = 0; i < 2; i++) {
    const job = await worker.next('buildJob');
    leaves.set(job.drvPath, job.jobId);
  }
  t.same([...leaves.keys()].sort(), [p.drvPath, r.drvPath].sort());

  // Hold the outbox: a's start transaction waits at its durable event's insert.
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let locked!: () => void;
  const lockTaken = new Promise<void>((resolve) => (locked = resolve));
  const holder = kiln.sql.begin(async (tx) => {
    await tx`lock table event_outbox in share mode`;
    locked();
    await released;
  });
  await lockTaken;
  succeed(worker, leaves.get(r.drvPath)!, r);
  await eventually(async () => (await kiln.sql<{ n: number }[]>`
    select count(*)::int as n from pg_locks where relation = 'event_outbox'::regclass and not granted`)[0]!.n,
  { until: (n) => n > 0, timeout: 30_000, interval: 20, message: 'a\'s start transaction waits for the outbox' });

  // p's completion readies b; b is placed by the passes it wakes while a's start is still under way.
  succeed(worker, leaves.get(p.drvPath)!, p);
  const statusOf = async (n: DerivationNodeFixture) => (await kiln.sql<{ status: string }[]>`
    select db.status from derivation_builds db join derivations d on d.id = db.derivation_id where d.drv_path = ${n.drvPath}`)[0]!.status;
  await eventually(() => statusOf(p), { until: (s) => s === 'completed', timeout: 30_000, interval: 20, message: 'p completes' });
  await eventually(async () => find(kiln.root.inspect() as Node, 'scheduler-loop')?.state, { until: (s) => s === 'idle', timeout: 30_000, interval: 20, message: 'the passes it woke ended' });
  t.equal(await statusOf(b), 'queued', 'b is not started while a\'s start transaction is under way');

  release();
  await holder;
  const first = await worker.next('buildJob');
  const second = await worker.next('buildJob');
  t.same([first.drvPath, second.drvPath], [a.drvPath, b.drvPath], 'a\'s job, then b\'s from the next start transaction');
});
