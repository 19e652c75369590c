// Simulated build workers for the dispatch bench: each accepts a buildJob and reports success at
// once (outputs as the graph names them, nothing pushed), and the fleet records when every job
// arrived and when its result left, so ready → dispatched can be worked out from the graph.
import { randomBytes } from 'node:crypto';
import type { DerivationNode } from '../protocol/index.js';
import { connectSimWorker, type SimWorker } from './simWorker.js';

const NIX32 = '0123456789abcdfghijklmnpqrsvwxyz';
const narHash = `sha256:${Array.from(randomBytes(52), (b) => NIX32[b % 32]).join('')}`;

export interface BuildFleet {
  workers: SimWorker[];
  /** drv path → performance.now() when its buildJob arrived (the first time) */
  received: Map<string, number>;
  /** drv path → performance.now() when its buildResult was sent */
  resultSent: Map<string, number>;
  /** buildJobs for a derivation already dispatched once */
  duplicates: number;
  close(): void;
}

export async function startBuildFleet(url: string, nodes: readonly DerivationNode[], count: number, slots: number): Promise<BuildFleet> {
  const byPath = new Map(nodes.map((n) => [n.drvPath, n]));
  const fleet: BuildFleet = { workers: [], received: new Map(), resultSent: new Map(), duplicates: 0, close: () => fleet.workers.forEach((w) => w.close()) };
  for (let i = 0; i < count; i++) {
    const worker = await connectSimWorker(url, { capabilities: { eval: false, build: true }, maxConcurrentBuilds: slots });
    worker.onMessage((m) => {
      if (m.t !== 'buildJob') return;
      const now = performance.now();
      if (fleet.received.has(m.drvPath)) fleet.duplicates++;
      else fleet.received.set(m.drvPath, now);
      worker.send({ t: 'jobAccepted', jobId: m.jobId });
      const node = byPath.get(m.drvPath);
      const outputs = Object.entries(node?.outputs ?? {}).flatMap(([name, path]) => (path === null ? [] : [{
        name, path, narHash, narSize: 1024, references: [], deriver: m.drvPath, ca: null,
      }]));
      worker.send({ t: 'buildResult', jobId: m.jobId, drvPath: m.drvPath, outputs, alreadyValid: false, durationMs: 0, logBytes: 0, logDroppedBytes: 0 });
      fleet.resultSent.set(m.drvPath, performance.now());
    });
    fleet.workers.push(worker);
  }
  return fleet;
}

export interface DispatchFigures {
  dispatched: number;
  duplicates: number;
  /** dispatched ÷ (start → last buildJob) */
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

const percentile = (xs: Float64Array, p: number) => xs[Math.min(xs.length - 1, Math.floor(xs.length * p))] ?? NaN;

/**
 * A derivation is ready when the last result among its inputs was sent (the graph's leaves: at
 * `startedAt`); the latency is from then until its buildJob arrived.
 */
export function dispatchFigures(nodes: readonly DerivationNode[], fleet: BuildFleet, startedAt: number): DispatchFigures {
  const latencies: number[] = [];
  let last = startedAt;
  for (const node of nodes) {
    const got = fleet.received.get(node.drvPath);
    if (got === undefined) continue;
    last = Math.max(last, got);
    let ready = startedAt;
    for (const input of Object.keys(node.inputDrvs)) ready = Math.max(ready, fleet.resultSent.get(input) ?? Infinity);
    if (Number.isFinite(ready)) latencies.push(got - ready);
  }
  const sorted = Float64Array.from(latencies).sort();
  return {
    dispatched: fleet.received.size, duplicates: fleet.duplicates, perSecond: fleet.received.size / ((last - startedAt) / 1000),
    p50Ms: percentile(sorted, 0.5), p99Ms: percentile(sorted, 0.99), maxMs: sorted.at(-1) ?? NaN,
  };
}
