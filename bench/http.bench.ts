// GET /api/v1/health and /api/v1/config through kiln vs a bare uWS handler, same run, interleaved.
// Load comes from wrk (two threads, 64 connections) in its own process, so it does not share the
// server's event loop and, unlike single-threaded autocannon, is not the bottleneck itself.
// Usage: npx tsx bench/http.bench.ts [seconds per round] [rounds]
import uWS from 'uWebSockets.js';
import postgres from 'postgres';
import { loadConfig } from '../config/index.js';
import { startKiln } from '../cli/kiln.js';
import { loadAverage } from './childServer.js';
import { median, wrk } from './loadTools.js';

const seconds = Number(process.argv[2] ?? 5);
const rounds = Number(process.argv[3] ?? 3);
const admin = postgres('postgres://postgres@127.0.0.1:5432/postgres', { max: 1 });
const dbName = `kiln_bench_${process.pid}`;
await admin.unsafe(`create database ${dbName}`);

// Inside its request callback uWS corks the response itself, so no cork and no closure per
// request (tsx names every closure it makes, a defineProperty each, which would slow the floor).
const bare = uWS.App().get('/health', (res) => {
  res.writeHeader('Content-Type', 'application/json').end('{"error":false,"message":{"status":"ok"}}');
});
const barePort = await new Promise<number>((resolve) => bare.listen('127.0.0.1', 0, (s) => resolve(uWS.us_socket_local_port(s as unknown as uWS.us_socket))));

const kiln = await startKiln(
  loadConfig({ scope: 'server', env: {}, overrides: { 'database.url': `postgres://postgres@127.0.0.1:5432/${dbName}`, port: 0, useTls: false, 'log.level.default': 'error', baseDir: '/tmp/kiln-bench' } }),
);

const results: Record<string, { rps: number[]; p50: number[]; p99: number[]; errors: number }> = {};
const targets = Object.entries({
  'bare uWS': `http://127.0.0.1:${barePort}/health`,
  'kiln /api/v1/config': `${kiln.url}/api/v1/config`,
  'kiln /api/v1/health (one DB round trip)': `${kiln.url}/api/v1/health`,
});
for (const [, url] of targets) await wrk(url, { connections: 64, seconds: 1 }); // warm-up
/** each target's req/s ÷ the bare handler's in the same round */
const roundRatios: Record<string, number[]> = {};
for (let round = 0; round < rounds; round++) {
  // Which target goes first rotates from round to round.
  for (const [name, url] of [...targets.slice(round % targets.length), ...targets.slice(0, round % targets.length)]) {
    const r = await wrk(url, { connections: 64, seconds });
    const acc = (results[name] ??= { rps: [], p50: [], p99: [], errors: 0 });
    acc.rps.push(r.rps); acc.p50.push(r.p50Ms); acc.p99.push(r.p99Ms); acc.errors += r.non2xx + r.socketErrors;
  }
  for (const [name] of targets) (roundRatios[name] ??= []).push(+(results[name]!.rps.at(-1)! / results['bare uWS']!.rps.at(-1)!).toFixed(3));
  console.error(`round ${round + 1}/${rounds} done`);
}
for (const [name, r] of Object.entries(results)) {
  console.log(JSON.stringify({
    bench: 'http', target: name, rps: Math.round(median(r.rps)), p50Ms: median(r.p50), p99Ms: median(r.p99), errors: r.errors,
    ratioToBareUws: median(roundRatios[name]!), roundRatios: roundRatios[name], loadAverage: loadAverage(),
  }));
}
await kiln.stop();
bare.close();
await admin.unsafe(`drop database ${dbName} with (force)`);
await admin.end();
