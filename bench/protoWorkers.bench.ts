// N simulated workers (protocol-level, no Nix) on one server process: the time to connect them
// all (each handshake compares a peer token's SHA-256 with the stored one), then RSS and CPU of the server while
// they only beat. Baseline in the same run: a bare uWS server answering the same frames
// (bench/bareProtoServer.ts). Both servers run in processes of their own (a fresh one per round);
// the workers run here. Rounds interleave the two and alternate which goes first; each figure is
// the median over the rounds, each ratio the median of the rounds' kiln / bare ratios.
//
//   npm run bench -- proto-workers [workers=1000] [idleSecs=45] [rounds=3]   (BENCH_HTTP_THREADS=n: kiln's http.threads)
import { forkKiln, forkServer, type ChildServer, loadAverage, processUsage, type ProcessUsage } from './childServer.js';
import type { KilnProcessOptions } from './kilnProcess.js';
import { median } from './loadTools.js';
import { connectSimWorker, type SimWorker } from './simWorker.js';

const workerCount = Number(process.argv[2] ?? process.env['BENCH_WORKERS'] ?? 1000);
const idleSecs = Number(process.argv[3] ?? process.env['BENCH_IDLE_SECS'] ?? 45);
const roundCount = Number(process.argv[4] ?? process.env['BENCH_ROUNDS'] ?? 3);
// As many handshakes in flight as a real fleet's reconnect jitter gives; the server ends a
// handshake that takes longer than 30 s.
const CONNECT_CONCURRENCY = 8;
/** BENCH_HTTP_THREADS=n: kiln's http.threads (default: its own, the number of cores) */
const httpThreads = process.env['BENCH_HTTP_THREADS'] ? Number(process.env['BENCH_HTTP_THREADS']) : null;
const HEARTBEAT_SECS = 10;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const MiB = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);
const percentile = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))] ?? NaN;

interface Round {
  name: string;
  connectMs: number;
  handshakeP50: number;
  handshakeP99: number;
  connectCpuMs: number;
  idleCpuPercent: number;
  rssBeforeBytes: number;
  rssAfterBytes: number;
  /** anonymous memory of rssAfterBytes (the rest is mapped from files) */
  rssAnonAfterBytes: number;
  /** V8 heap in use after a full GC, with the workers minus before them, per worker */
  heapPerWorkerBytes: number;
  acks: number;
}

async function run(name: string, server: ChildServer<unknown>, url: string, tokens: { project: string; token: string }[] | undefined): Promise<Round> {
  const { pid } = server;
  await sleep(3000);
  const heapBefore = await server.gc();
  const before: ProcessUsage = processUsage(pid);
  const workers: SimWorker[] = [];
  const handshakes: number[] = [];
  let acks = 0;
  const started = performance.now();
  let next = 0;
  await Promise.all(Array.from({ length: CONNECT_CONCURRENCY }, async () => {
    while (next < workerCount) {
      next++;
      const t0 = performance.now();
      const worker = await connectSimWorker(url, tokens ? { tokens } : {});
      handshakes.push(performance.now() - t0);
      worker.onMessage((m) => {
        if (m.t === 'heartbeatAck') acks++;
      });
      workers.push(worker);
    }
  }));
  const connectMs = performance.now() - started;
  const connected = processUsage(pid);
  // Let the first round of beats (random phase within one interval) start everywhere.
  await sleep(HEARTBEAT_SECS * 1000);
  const idleStart = processUsage(pid);
  const acksAtStart = acks;
  await sleep(idleSecs * 1000);
  const idleEnd = processUsage(pid);
  const heapAfter = await server.gc();
  const after = processUsage(pid);
  const round: Round = {
    name, connectMs, handshakeP50: percentile(handshakes, 0.5), handshakeP99: percentile(handshakes, 0.99),
    connectCpuMs: connected.cpuMs - before.cpuMs, idleCpuPercent: ((idleEnd.cpuMs - idleStart.cpuMs) / (idleSecs * 1000)) * 100,
    rssBeforeBytes: before.rssBytes, rssAfterBytes: after.rssBytes, rssAnonAfterBytes: after.rssAnonBytes, heapPerWorkerBytes: (heapAfter - heapBefore) / workerCount, acks: acks - acksAtStart,
  };
  for (const worker of workers) worker.close();
  return round;
}

console.log(`proto-workers: ${workerCount} workers, ${idleSecs} s idle window, ${roundCount} rounds, load average ${loadAverage()}`);

async function bareRound(): Promise<Round> {
  const bare = await forkServer<{ url: string }>('./bareProtoServer.ts', [String(HEARTBEAT_SECS)]);
  const round = await run('bare uWS + msgpackr', bare, bare.ready.url, undefined);
  await bare.stop();
  return round;
}

async function kilnRound(): Promise<Round> {
  const kilnOptions: KilnProcessOptions = {
    overrides: { 'proto.maxConnections': workerCount + 100, ...(httpThreads === null ? {} : { 'http.threads': httpThreads }) }, registerToken: true,
  };
  const kiln = await forkKiln(kilnOptions);
  const protoUrl = `${kiln.ready.url.replace(/^http/, 'ws')}/proto`;
  const round = await run('kiln /proto, peer tokens', kiln, protoUrl, [{ project: kiln.ready.projectId, token: kiln.ready.peerToken! }]);
  await kiln.stop();
  return round;
}

const bareRounds: Round[] = [];
const kilnRounds: Round[] = [];
for (let i = 0; i < roundCount; i++) {
  if (i % 2 === 0) {
    bareRounds.push(await bareRound());
    kilnRounds.push(await kilnRound());
  } else {
    kilnRounds.push(await kilnRound());
    bareRounds.push(await bareRound());
  }
  const [b, k] = [bareRounds.at(-1)!, kilnRounds.at(-1)!];
  console.log(`round ${i + 1}/${roundCount}: connect ${(b.connectMs / 1000).toFixed(1)} / ${(k.connectMs / 1000).toFixed(1)} s, idle CPU ${b.idleCpuPercent.toFixed(2)} / ${k.idleCpuPercent.toFixed(2)} %, RSS with the workers ${MiB(b.rssAfterBytes)} / ${MiB(k.rssAfterBytes)} MiB (${MiB(b.rssAnonAfterBytes)} / ${MiB(k.rssAnonAfterBytes)} anonymous) (bare / kiln), load average ${loadAverage()}`);
}

/** Each figure's median over the rounds. */
const medianRound = (rounds: Round[]): Round => {
  const of = (field: keyof Omit<Round, 'name'>) => median(rounds.map((r) => r[field]));
  return {
    name: rounds[0]!.name, connectMs: of('connectMs'), handshakeP50: of('handshakeP50'), handshakeP99: of('handshakeP99'), connectCpuMs: of('connectCpuMs'),
    idleCpuPercent: of('idleCpuPercent'), rssBeforeBytes: of('rssBeforeBytes'), rssAfterBytes: of('rssAfterBytes'), rssAnonAfterBytes: of('rssAnonAfterBytes'), heapPerWorkerBytes: of('heapPerWorkerBytes'), acks: of('acks'),
  };
};
const ratio = (field: 'connectMs' | 'idleCpuPercent' | 'rssAfterBytes') => median(kilnRounds.map((k, i) => k[field] / Math.max(bareRounds[i]![field], 0.01)));

console.log(`load average after: ${loadAverage()}`);
console.log('| server | connect all (s) | handshake p50 / p99 (ms) | CPU to connect (s) | idle CPU (% of a core) | RSS before → with workers (MiB) | V8 heap per worker (KiB) | acks in window |');
console.log('|---|---:|---:|---:|---:|---:|---:|---:|');
for (const r of [medianRound(bareRounds), medianRound(kilnRounds)]) {
  const perWorkerKiB = r.heapPerWorkerBytes / 1024;
  console.log(`| ${r.name} | ${(r.connectMs / 1000).toFixed(1)} | ${r.handshakeP50.toFixed(0)} / ${r.handshakeP99.toFixed(0)} | ${(r.connectCpuMs / 1000).toFixed(1)} | ${r.idleCpuPercent.toFixed(2)} | ${MiB(r.rssBeforeBytes)} → ${MiB(r.rssAfterBytes)} | ${perWorkerKiB.toFixed(1)} | ${r.acks} |`);
}
console.log(`kiln / bare, median of the rounds' ratios: connect time ${ratio('connectMs').toFixed(1)}×, idle CPU ${ratio('idleCpuPercent').toFixed(1)}×, RSS with the workers ${ratio('rssAfterBytes').toFixed(1)}×`);
process.exit(0);
