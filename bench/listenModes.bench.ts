// How serving threads should share the port (issue 22 item 1; docs/http.md, "Serving threads"):
// SO_REUSEPORT (each thread listens, the kernel spreads connections) against uWS's acceptor
// hand-off (the main thread accepts and passes each socket to a thread's app). Bare uWS apps
// answering a narinfo-sized body (bench/listenModeServer.ts), so the figure is the mechanism's, not
// kiln's. Two loads: keep-alive connections (accepting happens once) and `Connection: close`
// (every request a new connection: the accept path is the work). wrk in its own process;
// interleaved rounds, the mode going first alternating; the median of the rounds' ratios.
//
//   npm run bench -- listen-modes [seconds=5] [rounds=3] [threads=2] [connections=64]
import { forkServer, loadAverage } from './childServer.js';
import { freePortForBench } from './freePort.js';
import { median, wrk, type WrkResult } from './loadTools.js';

const seconds = Number(process.argv[2] ?? 5);
const roundCount = Number(process.argv[3] ?? 3);
const threads = Number(process.argv[4] ?? 2);
const connections = Number(process.argv[5] ?? 64);
const MODES = ['reuseport', 'acceptor'] as const;
type Mode = (typeof MODES)[number];
const LOADS = { 'keep-alive': [] as string[], 'connection: close': ['Connection: close'] };
type Load = keyof typeof LOADS;

async function measure(mode: Mode, load: Load): Promise<WrkResult> {
  const port = await freePortForBench();
  const server = await forkServer<{ port: number }>('./listenModeServer.ts', [mode, String(threads), String(port)]);
  try {
    return await wrk(`http://127.0.0.1:${port}/x.narinfo`, { connections, seconds, headers: LOADS[load] });
  } finally {
    await server.stop();
  }
}

console.log(`listen-modes: ${threads} threads, ${connections} connections, ${roundCount} rounds × ${seconds} s, load average ${loadAverage()}`);
const results = new Map<string, WrkResult[]>();
for (let round = 0; round < roundCount; round++) {
  for (const load of Object.keys(LOADS) as Load[]) {
    const order = round % 2 === 0 ? MODES : [...MODES].reverse();
    for (const mode of order) {
      const result = await measure(mode, load);
      const key = `${mode}|${load}`;
      results.set(key, [...(results.get(key) ?? []), result]);
      console.log(`round ${round + 1}, ${load}, ${mode}: ${Math.round(result.rps)} req/s, p99 ${result.p99Ms.toFixed(1)} ms, socket errors ${result.socketErrors}`);
    }
  }
}
console.log(`load average after: ${loadAverage()}`);
console.log('| load | SO_REUSEPORT req/s (p99) | acceptor hand-off req/s (p99) | acceptor / reuseport (median of rounds, range) |');
console.log('|---|---:|---:|---:|');
for (const load of Object.keys(LOADS) as Load[]) {
  const [reuse, accept] = [results.get(`reuseport|${load}`)!, results.get(`acceptor|${load}`)!];
  const ratios = accept.map((a, i) => a.rps / reuse[i]!.rps);
  const figure = (rs: WrkResult[]) => `${Math.round(median(rs.map((r) => r.rps))).toLocaleString('en')} (${median(rs.map((r) => r.p99Ms)).toFixed(1)} ms)`;
  console.log(`| ${load} | ${figure(reuse)} | ${figure(accept)} | **${median(ratios).toFixed(2)}** (${Math.min(...ratios).toFixed(2)}-${Math.max(...ratios).toFixed(2)}) |`);
}
process.exit(0);
