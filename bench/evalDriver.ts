// The shared part of the eval-record and dispatch benches: kiln in its own process (open-mode
// workers on loopback), one simulated evaluating worker that streams a synthetic graph as
// evalBatch messages the way worker/evalJob.ts does, and the wait until the server has recorded it.
import postgres, { type Sql } from 'postgres';
import { EVAL_BATCH_TARGET_BYTES } from '../protocol/index.js';
import { batchesOf } from '../worker/jobContext.js';
import { BatchCredit } from '../worker/batchCredit.js';
import { forkKiln, type ChildServer } from './childServer.js';
import type { KilnProcessOptions, KilnProcessReady } from './kilnProcess.js';
import { connectSimWorker, type SimWorker } from './simWorker.js';
import type { SyntheticGraph } from './syntheticGraph.js';

export interface BenchServer {
  kiln: ChildServer<KilnProcessReady>;
  sql: Sql;
  protoUrl: string;
  stop(): Promise<void>;
}

export async function startBenchServer(extra: KilnProcessOptions['overrides'] = {}): Promise<BenchServer> {
  const options: KilnProcessOptions = { overrides: { localWorker: true, 'proto.maxConnections': 2000, ...extra }, registerToken: false };
  const kiln = await forkKiln(options);
  const sql = postgres(kiln.ready.databaseUrl, { max: 2, onnotice: () => undefined });
  return {
    kiln, sql, protoUrl: `${kiln.ready.url.replace(/^http/, 'ws')}/proto`,
    async stop() {
      await sql.end();
      await kiln.stop();
    },
  };
}

export interface RecordedEvaluation {
  evaluationId: string;
  /** performance.now() when the first evalBatch was sent */
  firstBatchAt: number;
  /** performance.now() when the last message (evalResult) was sent */
  sentAt: number;
  /** performance.now() when the evaluation was seen in phase building */
  buildingAt: number;
  batches: number;
  /** ms the simulated worker waited for the server's evalCredit (what "all sent after" is mostly made of when the server records slower than it sends) */
  creditWaitMs: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const estimate = (item: unknown): number => JSON.stringify(item).length;

/** Evaluates the project's default task with `evaluator` answering with `graph`; resolves once it is building. */
export async function recordGraph(server: BenchServer, evaluator: SimWorker, graph: SyntheticGraph): Promise<RecordedEvaluation> {
  const { ready } = server.kiln;
  // the server's credit for evalBatch messages, as worker/batchCredit.ts keeps it
  const credit = new BatchCredit();
  const jobs = new Promise<{ jobId: string; commit: string | null }>((resolve) => {
    evaluator.onMessage((m) => {
      if (m.t === 'evalJob') resolve(m);
      if (m.t === 'evalCredit') credit.grant(m.batches);
    });
  });
  const never = new AbortController().signal;
  const res = await fetch(`${ready.url}/api/v1/tasks/${ready.projectId}/default/evaluate`, {
    method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${ready.userToken}` },
    body: JSON.stringify({ commit: 'a'.repeat(40) }),
  });
  if (!res.ok) throw new Error(`evaluate: ${res.status} ${await res.text()}`);
  const evaluationId = ((await res.json()) as { message: string }).message;
  const job = await jobs;
  evaluator.send({ t: 'jobAccepted', jobId: job.jobId });
  const firstBatchAt = performance.now();
  let batches = 0;
  let creditWaitMs = 0;
  const takeCredit = async () => {
    const waiting = performance.now();
    await credit.take(never);
    creditWaitMs += performance.now() - waiting;
  };
  for (const derivations of batchesOf(graph.nodes, estimate, EVAL_BATCH_TARGET_BYTES)) {
    await takeCredit();
    evaluator.send({ t: 'evalBatch', jobId: job.jobId, derivations, attributes: [], errors: [] });
    batches++;
  }
  for (const attributes of batchesOf(graph.attributes, estimate, EVAL_BATCH_TARGET_BYTES)) {
    await takeCredit();
    evaluator.send({ t: 'evalBatch', jobId: job.jobId, derivations: [], attributes, errors: [] });
    batches++;
  }
  evaluator.send({
    t: 'evalResult', jobId: job.jobId, commit: job.commit, derivationCount: graph.nodes.length, attributeCount: graph.attributes.length,
    errorCount: 0, durationMs: 0,
  });
  const sentAt = performance.now();
  for (;;) {
    const [row] = await server.sql<{ phase: string }[]>`select phase from evaluations where id = ${evaluationId}`;
    if (row?.phase === 'building' || row?.phase === 'completed') break;
    if (row?.phase === 'failed') throw new Error('the evaluation failed');
    await sleep(20);
  }
  return { evaluationId, firstBatchAt, sentAt, buildingAt: performance.now(), batches, creditWaitMs };
}

export { connectSimWorker };
