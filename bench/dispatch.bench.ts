// Dispatch of a synthetic N-derivation evaluation (bench/syntheticGraph.ts) to simulated build
// workers that report success the moment a job arrives (no Nix, no NAR push): builds dispatched
// per second, and ready → dispatched latency (ready: the last result among a derivation's inputs
// left its worker; for the graph's leaves, the evaluation was seen building). kiln runs in a
// process of its own; the workers run here. Baseline in the same run: the same graph and fleet
// against an in-memory dispatcher on bare uWS (bench/bareDispatcher.ts), the floor the sockets,
// the codec and the fleet set. Each round has a graph of its own and fresh servers; rounds
// alternate which dispatcher goes first, and the ratio is the median of the rounds' ratios.
//
//   npm run bench -- dispatch [derivations=50000] [workers=16] [slots=8] [maxSecs=1200] [rounds=3]
//   BENCH_COUNT_STATEMENTS=1 adds the server's statements per dispatched build (through a counting proxy).
// Each kiln round prints the server process's CPU time per dispatched build (robust under load),
// and the CPU time of the PostgreSQL backends serving its database meanwhile (bench/pgBackendCpu.ts).
import { forkServer, loadAverage } from './childServer.js';
import { dispatchFigures, startBuildFleet, type BuildFleet, type DispatchFigures } from './buildFleet.js';
import { connectSimWorker, recordGraph, startBenchServer } from './evalDriver.js';
import { syntheticGraph, type SyntheticGraph } from './syntheticGraph.js';
import { pgBackendCpu } from './pgBackendCpu.js';

const size = Number(process.argv[2] ?? process.env['BENCH_DERIVATIONS'] ?? 50_000);
const workerCount = Number(process.argv[3] ?? process.env['BENCH_WORKERS'] ?? 16);
const slots = Number(process.argv[4] ?? process.env['BENCH_SLOTS'] ?? 8);
const maxSecs = Number(process.argv[5] ?? process.env['BENCH_MAX_SECS'] ?? 1200);
const rounds = Number(process.argv[6] ?? process.env['BENCH_ROUNDS'] ?? 3);

/** BENCH_HTTP_THREADS=n: kiln's http.threads (default: its own, the number of cores) */
const httpThreads = process.env['BENCH_HTTP_THREADS'] ? Number(process.env['BENCH_HTTP_THREADS']) : null;

/** BENCH_COUNT_STATEMENTS=1: the server's statements of the dispatch phase, by text (bench/statementCounter.ts) */
const countStatements = Boolean(process.env['BENCH_COUNT_STATEMENTS']);

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

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? NaN;
console.log(`dispatch: ${size} derivations, ${workerCount} workers × ${slots} slots, ${rounds} rounds, load average ${loadAverage()}`);

async function bareRound(graph: SyntheticGraph, seed: string): Promise<DispatchFigures> {
  const bare = await forkServer<{ url: string }>('./bareDispatcher.ts', [String(size), seed]);
  const fleet = await startBuildFleet(bare.ready.url, graph.nodes, workerCount, slots);
  const startedAt = performance.now();
  await bare.request('start');
  await drain(fleet, startedAt, 'bare');
  const figures = dispatchFigures(graph.nodes, fleet, startedAt);
  fleet.close();
  await bare.stop();
  return figures;
}

async function kilnRound(graph: SyntheticGraph): Promise<DispatchFigures> {
  const server = await startBenchServer(httpThreads === null ? {} : { 'http.threads': httpThreads });
  const evaluator = await connectSimWorker(server.protoUrl, { capabilities: { eval: true, build: false } });
  const fleet = await startBuildFleet(server.protoUrl, graph.nodes, workerCount, slots);
  const recorded = await recordGraph(server, evaluator, graph);
  console.log(`  recorded in ${((recorded.buildingAt - recorded.firstBatchAt) / 1000).toFixed(1)} s; dispatching`);
  if (countStatements) await server.kiln.request('statements-reset');
  await server.kiln.request('cpu-reset');
  const pgCpu = await pgBackendCpu(server.sql);
  await drain(fleet, recorded.buildingAt, 'kiln');
  const figures = dispatchFigures(graph.nodes, fleet, recorded.buildingAt);
  // CPU time rather than a rate: robust on a loaded machine (the rate is not)
  const cpuMs = (await server.kiln.request('cpu')) as number;
  const pgMs = await pgCpu();
  console.log(`  kiln server process CPU while dispatching: ${cpuMs.toFixed(0)} ms, ${((cpuMs * 1000) / figures.dispatched).toFixed(0)} µs per build${countStatements ? ' (the statement counter\'s proxy included)' : ''}`);
  console.log(`  PostgreSQL backends' CPU on its database meanwhile: ${pgMs.toFixed(0)} ms, ${((pgMs * 1000) / figures.dispatched).toFixed(0)} µs per build`);
  if (countStatements) {
    // the dispatch phase's statements (it starts when the evaluation was seen building, a little late)
    for (const line of (await server.kiln.request(`statements:${figures.dispatched}`)) as string[]) console.log(`  ${line}`);
  }
  let completedMs: number | null = null;
  while (figures.dispatched === size && performance.now() - recorded.buildingAt < maxSecs * 1000) {
    const [row] = await server.sql<{ phase: string }[]>`select phase from evaluations where id = ${recorded.evaluationId}`;
    if (row?.phase === 'completed') {
      completedMs = performance.now() - recorded.buildingAt;
      break;
    }
    await sleep(50);
  }
  console.log(`  kiln: evaluation completed ${completedMs === null ? 'not within the time limit' : `${(completedMs / 1000).toFixed(1)} s after it was seen building`}`);
  fleet.close();
  evaluator.close();
  await server.stop();
  return figures;
}

const bareFigures: DispatchFigures[] = [];
const kilnFigures: DispatchFigures[] = [];
for (let round = 0; round < rounds; round++) {
  const seed = `dispatch-${round}-${Date.now()}`;
  const graph = syntheticGraph(size, { seed });
  if (round % 2 === 0) {
    bareFigures.push(await bareRound(graph, seed));
    kilnFigures.push(await kilnRound(graph));
  } else {
    kilnFigures.push(await kilnRound(graph));
    bareFigures.push(await bareRound(graph, seed));
  }
  const [b, k] = [bareFigures.at(-1)!, kilnFigures.at(-1)!];
  console.log(`round ${round + 1}/${rounds} (${graph.edges} edges): floor ${b.perSecond.toFixed(0)} builds/s, kiln ${k.perSecond.toFixed(0)} builds/s (${k.dispatched} dispatched), load average ${loadAverage()}`);
}

/** Each figure's median over the rounds. */
const medianOf = (fs: DispatchFigures[]): DispatchFigures => {
  const of = (field: keyof DispatchFigures) => median(fs.map((f) => f[field]));
  return { dispatched: of('dispatched'), duplicates: of('duplicates'), perSecond: of('perSecond'), p50Ms: of('p50Ms'), p99Ms: of('p99Ms'), maxMs: of('maxMs') };
};
const ratio = median(kilnFigures.map((k, i) => k.perSecond / bareFigures[i]!.perSecond));

console.log(`load average after: ${loadAverage()}`);
console.log('| dispatcher | dispatched | builds/s | ready → dispatched p50 / p99 / max ms | vs floor (builds/s, median of round ratios) |');
console.log('|---|---:|---:|---:|---:|');
for (const [name, f, vs] of [['in-memory dispatcher on bare uWS (floor)', medianOf(bareFigures), 1], ['kiln scheduler', medianOf(kilnFigures), ratio]] as [string, DispatchFigures, number][]) {
  const dup = f.duplicates > 0 ? ` (+${f.duplicates} twice)` : '';
  console.log(`| ${name} | ${f.dispatched}${dup} | ${f.perSecond.toFixed(0)} | ${f.p50Ms.toFixed(0)} / ${f.p99Ms.toFixed(0)} / ${f.maxMs.toFixed(0)} | ${vs.toFixed(3)} |`);
}
process.exit(0);
