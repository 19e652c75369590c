// Dispatch of a synthetic N-derivation evaluation (bench/syntheticGraph.ts) to simulated build
// workers that report success the moment a job arrives (no Nix, no NAR push): builds dispatched
// per second, and ready → dispatched latency (ready: the last result among a derivation's inputs
// left its worker; for the graph's leaves, the evaluation was seen building). kiln runs in a
// process of its own; the workers run here. Baseline in the same run: the same graph and fleet
// against an in-memory dispatcher on bare uWS (bench/bareDispatcher.ts), the floor the sockets,
// the codec and the fleet set.
//
//   npm run bench -- dispatch [derivations=50000] [workers=16] [slots=8] [maxSecs=1200]
import { forkServer, loadAverage } from './childServer.js';
import { dispatchFigures, startBuildFleet, type BuildFleet, type DispatchFigures } from './buildFleet.js';
import { connectSimWorker, recordGraph, startBenchServer } from './evalDriver.js';
import { syntheticGraph } from './syntheticGraph.js';

const size = Number(process.argv[2] ?? process.env['BENCH_DERIVATIONS'] ?? 50_000);
const workerCount = Number(process.argv[3] ?? process.env['BENCH_WORKERS'] ?? 16);
const slots = Number(process.argv[4] ?? process.env['BENCH_SLOTS'] ?? 8);
const maxSecs = Number(process.argv[5] ?? process.env['BENCH_MAX_SECS'] ?? 1200);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until every derivation was dispatched, or maxSecs, printing progress every 10 s. */
async function drain(fleet: BuildFleet, startedAt: number, label: string): Promise<void> {
  let lastReport = performance.now();
  while (fleet.received.size < size && performance.now() - startedAt < maxSecs * 1000) {
    await sleep(20);
    if (performance.now() - lastReport > 10_000) {
      lastReport = performance.now();
      console.log(`  ${label}: ${fleet.received.size} dispatched after ${((lastReport - startedAt) / 1000).toFixed(0)} s`);
    }
  }
}

const seed = `dispatch-${Date.now()}`;
const graph = syntheticGraph(size, { seed });
console.log(`dispatch: ${size} derivations (${graph.edges} edges, ${graph.attributes.length} attributes), ${workerCount} workers × ${slots} slots, load average ${loadAverage()}`);

// Baseline first: it is quick, and kiln's run leaves a database behind it.
const bare = await forkServer<{ url: string }>('./bareDispatcher.ts', [String(size), seed]);
const bareFleet = await startBuildFleet(bare.ready.url, graph.nodes, workerCount, slots);
const bareStart = performance.now();
await bare.request('start');
await drain(bareFleet, bareStart, 'bare');
const floor = dispatchFigures(graph.nodes, bareFleet, bareStart);
bareFleet.close();
await bare.stop();

const server = await startBenchServer();
const evaluator = await connectSimWorker(server.protoUrl, { capabilities: { eval: true, build: false } });
const fleet = await startBuildFleet(server.protoUrl, graph.nodes, workerCount, slots);
const recorded = await recordGraph(server, evaluator, graph);
console.log(`  recorded in ${((recorded.buildingAt - recorded.firstBatchAt) / 1000).toFixed(1)} s; dispatching`);
await drain(fleet, recorded.buildingAt, 'kiln');
const kiln = dispatchFigures(graph.nodes, fleet, recorded.buildingAt);
let completedMs: number | null = null;
while (kiln.dispatched === size && performance.now() - recorded.buildingAt < maxSecs * 1000) {
  const [row] = await server.sql<{ phase: string }[]>`select phase from evaluations where id = ${recorded.evaluationId}`;
  if (row?.phase === 'completed') {
    completedMs = performance.now() - recorded.buildingAt;
    break;
  }
  await sleep(50);
}
fleet.close();
evaluator.close();
await server.stop();

console.log(`load average after: ${loadAverage()}`);
console.log('| dispatcher | dispatched | builds/s | ready → dispatched p50 / p99 / max ms | vs floor (builds/s) |');
console.log('|---|---:|---:|---:|---:|');
for (const [name, f] of [['in-memory dispatcher on bare uWS (floor)', floor], ['kiln scheduler', kiln]] as [string, DispatchFigures][]) {
  const dup = f.duplicates > 0 ? ` (+${f.duplicates} twice)` : '';
  console.log(`| ${name} | ${f.dispatched}${dup} | ${f.perSecond.toFixed(0)} | ${f.p50Ms.toFixed(0)} / ${f.p99Ms.toFixed(0)} / ${f.maxMs.toFixed(0)} | ${(f.perSecond / floor.perSecond).toFixed(3)} |`);
}
console.log(`kiln: evaluation completed ${completedMs === null ? 'not within the time limit' : `${(completedMs / 1000).toFixed(1)} s after it was seen building`}`);
process.exit(0);
