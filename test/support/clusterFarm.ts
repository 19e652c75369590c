// A farm for the cluster job tests (test/services/builds/clusterJobs*.test.ts): a real server on a
// stepped clock, an evaluating protocol-level worker and build workers with the zones and endpoints asked.
import type { Test } from 'tap';
import { startTestKiln } from './kiln.js';
import { subscribedProject } from './subscribedProject.js';
import { steppedClock } from './clock.js';
import { eventually } from './eventually.js';
import { handshake, testHello, type ProtoClient } from './protoClient.js';
import { derivationNode, narHash, type DerivationNodeFixture } from './derivationNodes.js';

type Node = DerivationNodeFixture;
type Member = { client: ProtoClient; id: string; endpoint: string | null };
type Row = { id: string; state: string; zone: string | null; members: string[]; reason: string | null };

export const clusterNode = (name: string, size: number, extra: string[] = []): Node => {
  const node = derivationNode(name);
  node.derivation.requiredSystemFeatures = [`cluster-${size}`, ...extra] as never[];
  return node;
};

export async function clusterFarm(t: Test, workers: { zone: string | null; endpoint?: string; slots?: number }[]) {
  const clock = steppedClock(new Date());
  // the workers send no heartbeats, and the test steps the clock past any heartbeat timeout
  const kiln = await startTestKiln(t, { localWorker: true, 'build.retryBackoffSecs': 0, 'proto.workerHeartbeatTimeoutSecs': 0 }, { clock });
  const { token, projectId } = await subscribedProject(kiln);
  const url = `ws://127.0.0.1:${kiln.port}/proto`;
  const evaluator = await handshake(url, testHello({ capabilities: { eval: true, build: false, fetch: true, federate: false } }));
  t.teardown(() => evaluator.close());
  await evaluator.next('welcome');
  const members: Member[] = [];
  for (const w of workers) {
    const hello = testHello({ capabilities: { eval: false, build: true, fetch: true, federate: false }, zone: w.zone, maxConcurrentBuilds: w.slots ?? 1,
      ...(w.endpoint ? { endpoint: w.endpoint } : {}) });
    const client = await handshake(url, hello);
    t.teardown(() => client.close());
    await client.next('welcome');
    members.push({ client, id: hello.workerId, endpoint: w.endpoint ?? null });
  }
  const evaluate = async (nodes: Node[], task = 'default') => {
    const evaluated = await kiln.api<string>('POST', `/tasks/${projectId}/${task}/evaluate`, { token, body: { commit: 'a'.repeat(40) } });
    const evalJob = await evaluator.next('evalJob');
    evaluator.send({ t: 'evalBatch', jobId: evalJob.jobId, derivations: nodes.map((n) => n.derivation),
      attributes: nodes.map((n, i) => ({ path: ['packages', 'x86_64-linux', `n${i}`], drvPath: n.drvPath, outputs: { out: n.out } })), errors: [] });
    evaluator.send({ t: 'evalResult', jobId: evalJob.jobId, commit: 'a'.repeat(40), derivationCount: nodes.length, attributeCount: nodes.length, errorCount: 0, durationMs: 1 });
    await eventually(async () => (await kiln.api<{ phase: string }>('GET', `/evals/${evaluated.message}`, { token })).message,
      { until: (e) => e.phase !== 'queued' && e.phase !== 'evaluating', interval: 20, message: 'the evaluation is building' });
    await kiln.scheduler.passNow();
  };
  const succeed = (client: ProtoClient, jobId: string, n: Node) => client.send({
    t: 'buildResult', jobId, drvPath: n.drvPath, alreadyValid: false, durationMs: 1, logBytes: 0, logDroppedBytes: 0,
    outputs: [{ name: 'out', path: n.out, narHash: narHash(), narSize: 100, references: [], deriver: n.drvPath, ca: null }],
  });
  const status = async (n: Node) => (await kiln.sql<{ status: string }[]>`
    select db.status from derivation_builds db join derivations d on d.id = db.derivation_id where d.drv_path = ${n.drvPath}`)[0]?.status;
  const rows = () => kiln.sql<Row[]>`select id, state, zone, members::text[] as members, reason from cluster_jobs order by created_at, state`;
  const rowIn = (state: string, message: string) => eventually(async () => (await rows()).find((r) => r.state === state), { interval: 20, message });
  const member = (id: string) => members.find((m) => m.id === id)!;
  /** the build of the node in the last evaluation that reached it (POST /builds/{id}) */
  const buildOf = async (n: Node) => (await kiln.sql<{ id: string }[]>`
    select b.id from builds b join derivation_builds db on db.id = b.derivation_build_id join derivations d on d.id = db.derivation_id
    where d.drv_path = ${n.drvPath} order by b.created_at desc limit 1`)[0]!.id;
  return { kiln, token, projectId, clock, members, evaluate, succeed, status, rows, rowIn, member, buildOf };
}
