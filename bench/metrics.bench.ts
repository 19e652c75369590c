// What metrics cost (issue 21): narinfo hits at 64 connections on a kiln with metrics on
// (metrics.tokenFile set) against one with them off, in the same run, rounds alternating which goes
// first, the figure the median of the rounds' on / off ratios (goal ≥ 0.97); and the time to render
// a scrape of 10,000 series (goal ≤ 50 ms), plus a real GET /metrics of the running kiln.
// On a busy machine one long round says little (other work comes and goes within it): many short
// rounds, each pair run back to back in alternating order, and the median of the pairs' ratios.
// Throughput on a shared 2-core machine moves with whatever else runs; the CPU time the serving
// process spends per request does far less (another process's work takes the CPU away, it does not
// add to ours), so each round also reads this process's CPU time (both kilns live here, the idle
// one costs only its timers) and the figure to trust is the median of the rounds' CPU-per-request
// ratios off / on (1.0 = metrics cost nothing; 0.97 = they add 3 % per request).
// With `--pin` both kilns (this process) run on CPU 0 and wrk (one thread) on CPU 1, so the client
// does not compete with the server it measures; the load average is read before and after.
// The render is measured against prom-client's own registry holding the same series (the baseline:
// how kiln rendered before its prerendered families).
//   npx tsx bench/metrics.bench.ts [seconds] [rounds] [--pin]
//   npx tsx bench/metrics.bench.ts render      (the render figures alone, no servers)
//   npx tsx bench/metrics.bench.ts hotpath     (what one narinfo hit records, in ns, no servers)
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodeNarStrings, encodeU64, hashNar, narPadding, NIX32_ALPHABET } from '../protocol/index.js';
import { Counter, Registry } from 'prom-client';
import { KilnMetrics } from '../storage/index.js';
import { loadAverage } from './childServer.js';
import { startBenchKiln, type BenchKiln } from './benchKiln.js';
import { median, wrk, WRK_PATHS_SCRIPT } from './loadTools.js';

const pin = process.argv.includes('--pin');
const positional = process.argv.slice(2).filter((a) => a !== '--pin');
const renderOnly = positional[0] === 'render';
const seconds = Number(renderOnly ? 5 : positional[0] ?? 5);
const rounds = Number(positional[1] ?? 3);
const PATHS = 200;

/** The first and third quartiles: how far the middle half of the rounds spreads. */
const quartiles = (xs: number[]): [number, number] => {
  const sorted = [...xs].sort((a, b) => a - b);
  return [sorted[Math.floor((sorted.length - 1) / 4)]!, sorted[Math.ceil((sorted.length - 1) * 3 / 4)]!];
};

const nix32 = (n: number) => Array.from(randomBytes(n), (b) => NIX32_ALPHABET[b & 31]).join('');
const narOfFile = (contents: Buffer) => Buffer.concat([
  encodeNarStrings('nix-archive-1', '(', 'type', 'regular', 'contents'), encodeU64(contents.length), contents,
  Buffer.alloc(narPadding(contents.length)), encodeNarStrings(')'),
]);

/**
 * Median milliseconds of 20 renders of the big registries, kiln's and the prom-client baseline,
 * alternating: wall-clock, and this process's CPU time, which on a loaded machine is the figure to
 * trust (at load 20 on 2 cores a render is descheduled most of its wall-clock time).
 */
async function renders(): Promise<{ series: number; kilnMs: number; baselineMs: number; kilnCpuMs: number; baselineCpuMs: number }> {
  // A registry of 10,000 series: 3,334 caches × 3 narinfo outcomes (labelTopn raised to hold them all).
  const big = new KilnMetrics({ enabled: true, labelTopn: 10_000 });
  const baseline = new Registry();
  const counter = new Counter({ name: 'kiln_cache_narinfo_requests_total', help: 'narinfo requests', labelNames: ['cache', 'outcome'], registers: [baseline] });
  for (let i = 0; i < 3334; i++) {
    for (const outcome of ['hit', 'miss', 'upstream'] as const) {
      big.narinfoAnswered(`cache-${i}`, outcome);
      counter.inc({ cache: `cache-${i}`, outcome });
    }
  }
  const kilnMs: number[] = [];
  const baselineMs: number[] = [];
  const kilnCpuMs: number[] = [];
  const baselineCpuMs: number[] = [];
  const cpuMsSince = (before: NodeJS.CpuUsage) => {
    const used = process.cpuUsage(before);
    return (used.user + used.system) / 1000;
  };
  let series = 0;
  for (let i = 0; i < 20; i++) {
    let started = performance.now();
    let cpu = process.cpuUsage();
    const text = await big.text();
    kilnMs.push(performance.now() - started);
    kilnCpuMs.push(cpuMsSince(cpu));
    started = performance.now();
    cpu = process.cpuUsage();
    await baseline.metrics();
    baselineMs.push(performance.now() - started);
    baselineCpuMs.push(cpuMsSince(cpu));
    series = text.split('\n').filter((l) => l !== '' && !l.startsWith('#')).length;
  }
  return {
    series, kilnMs: +median(kilnMs).toFixed(1), baselineMs: +median(baselineMs).toFixed(1),
    kilnCpuMs: +median(kilnCpuMs).toFixed(1), baselineCpuMs: +median(baselineCpuMs).toFixed(1),
  };
}

/**
 * What metrics record per narinfo hit, alone: the HTTP histogram and the narinfo counter, as the
 * server calls them, in nanoseconds per request (median of 9 runs of 1,000,000), on and off.
 */
function hotPath(): { onNsPerRequest: number; offNsPerRequest: number } {
  const perRequest = (enabled: boolean): number => {
    const metrics = new KilnMetrics({ enabled, labelTopn: 20 });
    const runs: number[] = [];
    for (let run = 0; run < 9; run++) {
      const started = process.hrtime.bigint();
      for (let i = 0; i < 1_000_000; i++) {
        metrics.httpRequest('cache', 'get', 200, 0.0002);
        metrics.narinfoAnswered('bench', 'hit');
      }
      runs.push(Number(process.hrtime.bigint() - started) / 1_000_000);
    }
    return +median(runs).toFixed(1);
  };
  return { onNsPerRequest: perRequest(true), offNsPerRequest: perRequest(false) };
}

if (process.argv[2] === 'hotpath') {
  console.log(JSON.stringify({ bench: 'metrics', scenario: 'per-request recording', loadAverage: loadAverage(), ...hotPath() }));
  process.exit(0);
}

if (renderOnly) {
  console.log(JSON.stringify({ bench: 'metrics', scenario: 'scrape render', loadAverage: loadAverage(), ...(await renders()) }));
  process.exit(0);
}

const work = await mkdtemp(join(tmpdir(), 'kiln-bench-metrics-'));
const tokenFile = join(work, 'token');
await writeFile(tokenFile, 'bench-scrape-token');

/**
 * Each kiln's PostgreSQL connections, bounded: two kilns with the default pools (plus pg-boss's)
 * next to other benchmarks exhausted the server's max_connections at load 20. Narinfo hits are
 * answered from memory, so the bound does not shape the figure.
 */
const POOLS = { 'database.maxConnections': 3, 'database.cache.maxConnections': 3, 'database.web.maxConnections': 2, 'database.minConnections': 1, 'database.cache.minConnections': 1 };

/** A kiln with one public cache holding PATHS small paths; the narinfo paths it serves. */
async function cacheServer(metricsOn: boolean): Promise<{ bench: BenchKiln; paths: string[] }> {
  const bench = await startBenchKiln(metricsOn ? { ...POOLS, 'metrics.tokenFile': tokenFile } : POOLS);
  await bench.createCache('bench');
  const paths: string[] = [];
  for (let i = 0; i < PATHS; i++) {
    const nar = narOfFile(randomBytes(512));
    const hash = nix32(32);
    const digest = await hashNar([nar]);
    const form = new FormData();
    form.append('narinfo', JSON.stringify({ store_path: `/nix/store/${hash}-p${i}`, nar_hash: digest.narHash, nar_size: digest.narSize, references: [] }));
    form.append('nar', new Blob([nar]), 'x.nar');
    const res = await fetch(`${bench.kiln.url}/api/v1/caches/bench/nars`, { method: 'POST', headers: { authorization: `Bearer ${bench.token}` }, body: form });
    if (!res.ok) throw new Error(`upload: ${res.status} ${await res.text()}`);
    paths.push(`/cache/bench/${hash}.narinfo`);
  }
  return { bench, paths };
}

// every thread of this process (both kilns, their CPU pools) on CPU 0; wrk goes to CPU 1
if (pin) execFileSync('taskset', ['-a', '-cp', '0', String(process.pid)], { stdio: 'ignore' });
const wrkPlacement = pin ? { threads: 1, cpus: '1' } : {};
const loadBefore = loadAverage();
const on = await cacheServer(true);
const off = await cacheServer(false);
const script = join(work, 'paths.lua');
await writeFile(script, WRK_PATHS_SCRIPT);
const lists = { on: join(work, 'on.txt'), off: join(work, 'off.txt') };
await writeFile(lists.on, `${on.paths.join('\n')}\n`);
await writeFile(lists.off, `${off.paths.join('\n')}\n`);
const servers = [['on', on.bench.kiln.url, lists.on], ['off', off.bench.kiln.url, lists.off]] as const;
// threads started since (the CPU pools') are pinned too
if (pin) execFileSync('taskset', ['-a', '-cp', '0', String(process.pid)], { stdio: 'ignore' });
for (const [, url, pathsFile] of servers) await wrk(url, { connections: 64, seconds: 1, pathsFile, script, ...wrkPlacement }); // warm-up
const rps: Record<string, number[]> = { on: [], off: [] };
/** microseconds of this process's CPU (user + system) per request answered */
const cpuPerRequest: Record<string, number[]> = { on: [], off: [] };
const ratios: number[] = [];
const cpuRatios: number[] = [];
for (let round = 0; round < rounds; round++) {
  for (const [name, url, pathsFile] of round % 2 === 0 ? servers : [...servers].reverse()) {
    const cpuBefore = process.cpuUsage();
    const result = await wrk(url, { connections: 64, seconds, pathsFile, script, ...wrkPlacement });
    const cpu = process.cpuUsage(cpuBefore);
    rps[name]!.push(result.rps);
    cpuPerRequest[name]!.push(+((cpu.user + cpu.system) / result.requests).toFixed(2));
  }
  ratios.push(+(rps['on']!.at(-1)! / rps['off']!.at(-1)!).toFixed(3));
  cpuRatios.push(+(cpuPerRequest['off']!.at(-1)! / cpuPerRequest['on']!.at(-1)!).toFixed(3));
  console.error(`round ${round + 1}/${rounds} done`);
}
console.log(JSON.stringify({
  bench: 'metrics', scenario: 'narinfo hit, 64 conn, metrics on vs off', pinned: pin, seconds, rounds, loadBefore, loadAfter: loadAverage(),
  offRps: Math.round(median(rps['off']!)), onRps: Math.round(median(rps['on']!)), ratio: median(ratios),
  ratioQuartiles: quartiles(ratios), ratioOfMedians: +(median(rps['on']!) / median(rps['off']!)).toFixed(3), roundRatios: ratios,
  cpuUsPerRequest: { off: median(cpuPerRequest['off']!), on: median(cpuPerRequest['on']!) },
  cpuRatio: median(cpuRatios), cpuRatioQuartiles: quartiles(cpuRatios), cpuRoundRatios: cpuRatios,
}));

const rendered = await renders();
const scrapes: number[] = [];
for (let i = 0; i < 20; i++) {
  const started = performance.now();
  const res = await fetch(`${on.bench.kiln.url}/metrics`, { headers: { authorization: 'Bearer bench-scrape-token' } });
  await res.text();
  scrapes.push(performance.now() - started);
}
console.log(JSON.stringify({
  bench: 'metrics', scenario: 'scrape', loadAverage: loadAverage(), ...rendered,
  liveScrapeMsMedian: +median(scrapes).toFixed(1),
}));
await on.bench.stop();
await off.bench.stop();
await rm(work, { recursive: true, force: true });
