// GET /api/v1/health and /api/v1/config through kiln vs a bare uWS handler, same run, interleaved.
// Load comes from autocannon in its own process (64 connections), so it does not share the
// server's event loop. Usage: npx tsx bench/http.bench.ts [seconds per round] [rounds]
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import uWS from 'uWebSockets.js';
import postgres from 'postgres';
import { loadConfig } from '../config/index.js';
import { startKiln } from '../cli/kiln.js';

const seconds = Number(process.argv[2] ?? 5);
const rounds = Number(process.argv[3] ?? 3);
const admin = postgres('postgres://postgres@127.0.0.1:5432/postgres', { max: 1 });
const dbName = `kiln_bench_${process.pid}`;
await admin.unsafe(`create database ${dbName}`);

const bare = uWS.App().get('/health', (res) => {
  res.cork(() => res.writeHeader('Content-Type', 'application/json').end('{"error":false,"message":{"status":"ok"}}'));
});
const barePort = await new Promise<number>((resolve) => bare.listen('127.0.0.1', 0, (s) => resolve(uWS.us_socket_local_port(s as unknown as uWS.us_socket))));

const kiln = await startKiln(
  loadConfig({ scope: 'server', env: {}, overrides: { 'database.url': `postgres://postgres@127.0.0.1:5432/${dbName}`, port: 0, useTls: false, 'log.level.default': 'error', baseDir: '/tmp/kiln-bench' } }),
);

// Asynchronous on purpose: the servers run in this process and must keep their event loop.
async function load(url: string): Promise<{ rps: number; p50: number; p99: number; errors: number }> {
  const { stdout: out } = await promisify(execFile)('autocannon', ['-c', '64', '-d', String(seconds), '-j', url], { encoding: 'utf8' });
  const r = JSON.parse(out) as { requests: { average: number }; latency: { p50: number; p99: number }; errors: number; non2xx: number };
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, errors: r.errors + r.non2xx };
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? NaN;

const results: Record<string, { rps: number[]; p50: number[]; p99: number[]; errors: number }> = {};
const targets = {
  'bare uWS': `http://127.0.0.1:${barePort}/health`,
  'kiln /api/v1/config': `${kiln.url}/api/v1/config`,
  'kiln /api/v1/health (one DB round trip)': `${kiln.url}/api/v1/health`,
};
for (let round = 0; round < rounds; round++) {
  for (const [name, url] of Object.entries(targets)) {
    const r = await load(url);
    const acc = (results[name] ??= { rps: [], p50: [], p99: [], errors: 0 });
    acc.rps.push(r.rps); acc.p50.push(r.p50); acc.p99.push(r.p99); acc.errors += r.errors;
  }
}
const baseline = median(results['bare uWS']!.rps);
for (const [name, r] of Object.entries(results)) {
  console.log(JSON.stringify({ bench: 'http', target: name, rps: Math.round(median(r.rps)), p50Ms: median(r.p50), p99Ms: median(r.p99), errors: r.errors, ratioToBareUws: +(median(r.rps) / baseline).toFixed(3) }));
}
await kiln.stop();
bare.close();
await admin.unsafe(`drop database ${dbName} with (force)`);
await admin.end();
