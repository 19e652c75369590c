// Time to record an evaluation of N derivations: a simulated worker streams the synthetic graph
// (bench/syntheticGraph.ts) as evalBatch messages of about 512 KiB, as worker/evalJob.ts does,
// and the time runs from the first batch sent until the server shows the evaluation as building
// (every batch recorded, the phase changed). Baseline in the same run and database: the same rows
// (derivations, edges, derivation builds, builds) written by COPY into copies of those tables,
// with ids made by the client, which is PostgreSQL's floor for writing them; and the same COPY into
// copies that carry the real tables' foreign keys (what an operator's schema needs, docs/builds.md
// "Recording an evaluation"), the fair floor for kiln's ratio. Each round has a graph
// of its own; rounds alternate which of the two goes first, and the ratio is the median of the
// rounds' kiln / COPY ratios.
//
// `kiln-only` skips the baselines: the 500,000-derivation memory goal (server RSS ≤ 1 GiB) needs
// no floor, and the floor's COPY of that graph takes longer than kiln's recording.
// `again`: every round after the first records the first round's graph again, as a re-evaluation
// of an unchanged nixpkgs does (nothing new but the evaluation's builds rows); the baselines run in
// the first round only (their copies' keys would refuse the same rows twice).
//
//   npm run bench -- eval-record [derivations=50000] [rounds=3] [kiln-only] [again]
import { randomUUID } from 'node:crypto';
import postgres, { type Sql, type TransactionSql } from 'postgres';
import { loadAverage, processUsage } from './childServer.js';
import { pgBackendCpu } from './pgBackendCpu.js';
import { connectSimWorker, recordGraph, startBenchServer } from './evalDriver.js';
import { syntheticGraph, type SyntheticGraph } from './syntheticGraph.js';

const size = Number(process.argv[2] ?? process.env['BENCH_DERIVATIONS'] ?? 50_000);
const rounds = Number(process.argv[3] ?? process.env['BENCH_ROUNDS'] ?? 3);
const kilnOnly = process.argv.slice(4).includes('kiln-only');
const again = process.argv.slice(4).includes('again');
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? NaN;

async function copyRows(sql: TransactionSql, table: string, columns: string, rows: string[]): Promise<void> {
  const stream = await sql.unsafe(`copy ${table} (${columns}) from stdin`).writable();
  await new Promise<void>((resolve, reject) => {
    stream.on('error', reject);
    stream.on('finish', () => resolve());
    for (let i = 0; i < rows.length; i += 1000) stream.write(`${rows.slice(i, i + 1000).join('\n')}\n`);
    stream.end();
  });
}

/** The floor: the same rows by COPY, ids made here, no lookups, no conflict handling. */
async function copyBaseline(sql: Sql, meter: Sql, graph: SyntheticGraph, prefix: string): Promise<{ ms: number; pgCpuMs: number }> {
  const evaluationId = randomUUID();
  if (prefix === 'bench_fk_') await sql`insert into bench_fk_evaluations (id) values (${evaluationId})`;
  const ids = new Map(graph.nodes.map((n) => [n.drvPath, randomUUID()]));
  const pgCpu = await pgBackendCpu(meter);
  const started = performance.now();
  const array = (xs: string[]) => `{${xs.join(',')}}`;
  await sql.begin(async (tx) => {
    await copyRows(tx, `${prefix}derivations`, 'id, drv_path, name, system, required_features, outputs, input_srcs, prefer_local_build, fixed_output',
      graph.nodes.map((n) => [ids.get(n.drvPath), n.drvPath, n.name, n.system, array(n.requiredSystemFeatures), JSON.stringify(n.outputs), array(n.inputSrcs), 'f', 'f'].join('\t')));
    await copyRows(tx, `${prefix}edges`, 'derivation_id, depends_on, outputs',
      graph.nodes.flatMap((n) => Object.keys(n.inputDrvs).map((input) => [ids.get(n.drvPath), ids.get(input), '{}'].join('\t'))));
    const buildIds = graph.nodes.map(() => randomUUID());
    await copyRows(tx, `${prefix}derivation_builds`, 'id, derivation_id', graph.nodes.map((n, i) => `${buildIds[i]}\t${ids.get(n.drvPath)}`));
    await copyRows(tx, `${prefix}builds`, 'evaluation_id, derivation_build_id', buildIds.map((id) => `${evaluationId}\t${id}`));
  });
  const ms = performance.now() - started;
  return { ms, pgCpuMs: await pgCpu() };
}

console.log(`eval-record: ${size} derivations, ${rounds} round(s), load average ${loadAverage()}`);
const server = await startBenchServer();
// PostgreSQL's CPU is read over a connection of its own (pgBackendCpu leaves out the backend it
// asks through), so the COPY's backend, one of server.sql's, is counted
const meter = postgres(server.kiln.ready.databaseUrl, { max: 1, onnotice: () => undefined });
for (const table of ['derivations', 'derivation_edges', 'derivation_builds', 'builds']) {
  const copy = table === 'derivation_edges' ? 'bench_edges' : `bench_${table}`;
  await server.sql.unsafe(`create table ${copy} (like ${table} including all)`);
  await server.sql.unsafe(`create table ${copy.replace('bench_', 'bench_fk_')} (like ${table} including all)`);
}
// the real tables' foreign keys (storage/db/migrations/0008_builds.sql), between the copies; the
// evaluations a baseline's builds name are one-column rows, as the key check needs no more
await server.sql.unsafe(`
  create table bench_fk_evaluations (id uuid primary key);
  alter table bench_fk_edges add foreign key (derivation_id) references bench_fk_derivations on delete cascade,
    add foreign key (depends_on) references bench_fk_derivations on delete cascade;
  alter table bench_fk_derivation_builds add foreign key (derivation_id) references bench_fk_derivations on delete cascade;
  alter table bench_fk_builds add foreign key (evaluation_id) references bench_fk_evaluations on delete cascade,
    add foreign key (derivation_build_id) references bench_fk_derivation_builds on delete cascade;`).simple();
const floor: number[] = [];
const keyedFloor: number[] = [];
const kiln: number[] = [];
/** CPU ms per round: PostgreSQL's backends for the COPY and for kiln's recording, kiln's server process, the simulated worker (this process) */
const cpu: { copy: number; keyed: number; kilnPg: number; kilnServer: number; sender: number; creditWait: number }[] = [];
let edges = 0;
let batches = 0;
let peakRss = 0;
let evaluator: Awaited<ReturnType<typeof connectSimWorker>> | undefined;
let firstGraph: SyntheticGraph | undefined;
for (let round = 0; round < rounds; round++) {
  const graph = again && firstGraph ? firstGraph : syntheticGraph(size, { seed: `round-${round}-${Date.now()}` });
  firstGraph ??= graph;
  const withBaselines = !kilnOnly && !(again && round > 0);
  edges = graph.edges;
  // connected after the graph is made: making 500,000 derivations holds this process for a while
  evaluator ??= await connectSimWorker(server.protoUrl, { capabilities: { eval: true, build: false } });
  const worker = evaluator;
  const roundCpu = { copy: NaN, keyed: NaN, kilnPg: NaN, kilnServer: NaN, sender: NaN, creditWait: NaN };
  cpu.push(roundCpu);
  const recordWithKiln = async () => {
    // the server's resident memory while it records (the 500,000-derivation goal: ≤ 1 GiB)
    const sampler = setInterval(() => {
      peakRss = Math.max(peakRss, processUsage(server.kiln.pid).rssBytes);
    }, 100);
    const [pgCpu, serverBefore, senderBefore] = [await pgBackendCpu(meter), processUsage(server.kiln.pid).cpuMs, process.cpuUsage()];
    const recorded = await recordGraph(server, worker, graph).finally(() => clearInterval(sampler));
    const sender = process.cpuUsage(senderBefore);
    Object.assign(roundCpu, {
      kilnPg: await pgCpu(), kilnServer: processUsage(server.kiln.pid).cpuMs - serverBefore, sender: (sender.user + sender.system) / 1000,
    });
    batches = recorded.batches;
    kiln.push(recorded.buildingAt - recorded.firstBatchAt);
    roundCpu.creditWait = recorded.creditWaitMs;
    return recorded.sentAt - recorded.firstBatchAt;
  };
  let sentMs: number;
  const baselines = async () => {
    if (!withBaselines) return;
    const bare = await copyBaseline(server.sql, meter, graph, 'bench_');
    const keyed = await copyBaseline(server.sql, meter, graph, 'bench_fk_');
    floor.push(bare.ms);
    keyedFloor.push(keyed.ms);
    Object.assign(roundCpu, { copy: bare.pgCpuMs, keyed: keyed.pgCpuMs });
  };
  if (round % 2 === 0) {
    await baselines();
    sentMs = await recordWithKiln();
  } else {
    sentMs = await recordWithKiln();
    await baselines();
  }
  const c = roundCpu;
  console.log(`round ${round + 1} CPU ms: PostgreSQL for COPY ${c.copy}, for COPY with foreign keys ${c.keyed}, for kiln ${c.kilnPg} (${(c.kilnPg / c.copy).toFixed(2)}× COPY's); kiln's server ${c.kilnServer}; the simulated worker ${c.sender.toFixed(0)} (it waited ${c.creditWait.toFixed(0)} ms for credit)`);
  if (!withBaselines) console.log(`round ${round + 1}${again && round > 0 ? ' (the first round\'s graph again)' : ''}: kiln ${kiln.at(-1)!.toFixed(0)} ms (all sent after ${sentMs.toFixed(0)} ms), server peak RSS ${(peakRss / 2 ** 20).toFixed(0)} MiB, load average ${loadAverage()}`);
  else console.log(`round ${round + 1}: COPY ${floor.at(-1)!.toFixed(0)} ms, COPY with foreign keys ${keyedFloor.at(-1)!.toFixed(0)} ms, kiln ${kiln.at(-1)!.toFixed(0)} ms (all sent after ${sentMs.toFixed(0)} ms), load average ${loadAverage()}`);
}
const [{ count }] = await server.sql<[{ count: string }]>`select count(*) from derivation_builds`;
console.log(`graph: ${size} derivations, ${edges} edges, ${batches} evalBatch messages; derivation_builds rows: ${count}`);
console.log(`load average after: ${loadAverage()}; server peak RSS while recording: ${(peakRss / 2 ** 20).toFixed(0)} MiB`);
if (!kilnOnly && !again) {
  console.log('| run | median ms | derivations/s | vs COPY |');
  console.log('|---|---:|---:|---:|');
  console.log(`| COPY of the same rows (floor) | ${median(floor).toFixed(0)} | ${(size / (median(floor) / 1000)).toFixed(0)} | 1.00 |`);
  console.log(`| COPY of the same rows, tables with kiln's foreign keys | ${median(keyedFloor).toFixed(0)} | ${(size / (median(keyedFloor) / 1000)).toFixed(0)} | ${median(keyedFloor.map((k, i) => k / floor[i]!)).toFixed(2)} |`);
  console.log(`| kiln against COPY with foreign keys | | | ${median(kiln.map((k, i) => k / keyedFloor[i]!)).toFixed(2)} (median of round ratios) |`);
  console.log(`| PostgreSQL CPU: COPY / with foreign keys / kiln's recording (medians, ms) | ${median(cpu.map((c) => c.copy))} / ${median(cpu.map((c) => c.keyed))} / ${median(cpu.map((c) => c.kilnPg))} | | ${median(cpu.map((c) => c.kilnPg / c.copy)).toFixed(2)} (kiln, median of round ratios) |`);
  console.log(`| kiln: first evalBatch → building | ${median(kiln).toFixed(0)} | ${(size / (median(kiln) / 1000)).toFixed(0)} | ${median(kiln.map((k, i) => k / floor[i]!)).toFixed(2)} (median of round ratios; ratio of medians ${(median(kiln) / median(floor)).toFixed(2)}) |`);
}
evaluator?.close();
await meter.end();
await server.stop();
process.exit(0);
