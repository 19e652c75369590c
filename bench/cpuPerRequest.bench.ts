// CPU time per request of the binary cache's hottest answers (narinfo hits, 404 misses, small NAR files and 2 MiB ones), kiln
// against nginx (`worker_processes auto`) serving the same narinfo text: what the kernel counted
// for the server's threads (utime + stime of /proc/<pid>/task/*) over a wrk run, divided by the
// requests wrk completed. Unlike requests per second, this figure holds on a machine other work is
// loading: it is the server's own cost, not its share of the cores. Also the server's RSS at rest
// and after the runs. kiln runs in a process of its own (bench/kilnProcess.ts, `http.threads` at its
// default unless given), so the figures are its own.
//   npm run bench -- cpu-per-request [seconds=5] [rounds=3] [http.threads|default] [lists=hits,misses,nars,medium]
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodeNarStrings, encodeU64, hashNar, narPadding, NIX32_ALPHABET } from '../protocol/index.js';
import { forkKiln, loadAverage, processUsage } from './childServer.js';
import { freePortForBench } from './freePort.js';
import type { KilnProcessOptions } from './kilnProcess.js';
import { median, startNginx, wrk, WRK_PATHS_SCRIPT } from './loadTools.js';

const seconds = Number(process.argv[2] ?? 5);
const rounds = Number(process.argv[3] ?? 3);
const threads = process.argv[4] === undefined || process.argv[4] === 'default' ? undefined : Number(process.argv[4]);
/** 2 MiB NAR files (the medium list, 8 connections as binaryCache.bench.ts's): what the serving threads send per byte */
const MEDIUM_NARS = 8;
const PATHS = 1000;
const CLOCK_TICKS_PER_SEC = 100;

const nix32 = (n: number) => Array.from(randomBytes(n), (b) => NIX32_ALPHABET[b & 31]).join('');
const narOfFile = (contents: Buffer) => Buffer.concat([
  encodeNarStrings('nix-archive-1', '(', 'type', 'regular', 'contents'), encodeU64(contents.length), contents,
  Buffer.alloc(narPadding(contents.length)), encodeNarStrings(')'),
]);

/** CPU milliseconds of every thread of `pid`, keyed by its name and id (`main` for the process's first thread). */
function threadCpu(pid: number): Map<string, number> {
  const cpu = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const name = tid === String(pid) ? 'main' : `${stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))}-${tid}`;
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ms = ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_SEC;
      cpu.set(name, (cpu.get(name) ?? 0) + ms);
    } catch {
      // a thread that ended meanwhile
    }
  }
  return cpu;
}

/** nginx's master and workers: the processes whose parent is the master. */
function nginxPids(master: number): number[] {
  const pids = [master];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === master) pids.push(Number(entry));
    } catch {
      // gone
    }
  }
  return pids;
}

const sumCpu = (pids: number[]): Map<string, number> => {
  const all = new Map<string, number>();
  for (const pid of pids) for (const [name, ms] of threadCpu(pid)) all.set(pid === pids[0] ? name : `${name}@${pid}`, ms);
  return all;
};

const kilnOptions: KilnProcessOptions = { overrides: threads === undefined ? {} : { 'http.threads': threads }, registerToken: false };
const kiln = await forkKiln(kilnOptions);
const { url: kilnUrl, userToken } = kiln.ready;
await new Promise((r) => setTimeout(r, 3000));
const rssAtRest = processUsage(kiln.pid).rssBytes;
const mib = (bytes: number) => +(bytes / 2 ** 20).toFixed(1);
/** Where the RSS is: the main thread's V8 heap and external memory, and the serving threads' (summed). */
async function memory(): Promise<Record<string, number>> {
  const main = (await kiln.request('memory')) as NodeJS.MemoryUsage;
  const threads = (await kiln.request('threads')) as Record<string, number>;
  return {
    rss: mib(processUsage(kiln.pid).rssBytes), mainHeap: mib(main.heapTotal), mainExternal: mib(main.external), mainArrayBuffers: mib(main.arrayBuffers),
    threadsHeap: mib(threads['heapBytes'] ?? 0), threadsExternal: mib(threads['externalBytes'] ?? 0),
  };
}
const memoryAtRest = await memory();

async function upload(nar: Buffer, name: string): Promise<string> {
  const hash = nix32(32);
  const digest = await hashNar([nar]);
  const form = new FormData();
  form.append('narinfo', JSON.stringify({ store_path: `/nix/store/${hash}-${name}`, nar_hash: digest.narHash, nar_size: digest.narSize, references: [] }));
  form.append('nar', new Blob([nar]), 'x.nar');
  const res = await fetch(`${kilnUrl}/api/v1/caches/main/nars`, { method: 'POST', headers: { authorization: `Bearer ${userToken}` }, body: form });
  if (!res.ok) throw new Error(`upload: ${res.status} ${await res.text()}`);
  return hash;
}

const work = await mkdtemp(join(tmpdir(), 'kiln-bench-cpu-'));
const root = join(work, 'www');
await mkdir(join(root, 'cache', 'main'), { recursive: true });
const hashes: string[] = [];
for (let i = 0; i < PATHS; i += 8) {
  hashes.push(...(await Promise.all(Array.from({ length: 8 }, (_, j) => upload(narOfFile(randomBytes(1024 + ((i + j) % 3072))), `p-${i + j}`)))));
}
await mkdir(join(root, 'cache', 'main', 'nar'), { recursive: true });
const narUrls: string[] = [];
for (const hash of hashes) {
  const text = await (await fetch(`${kilnUrl}/cache/main/${hash}.narinfo`)).text();
  await writeFile(join(root, 'cache', 'main', `${hash}.narinfo`), text);
  // the NAR file itself (1-4 KiB), for the small-NAR runs: nginx serves the same bytes
  const narUrl = `/cache/main/${/^URL: (.*)$/m.exec(text)![1]!}`;
  await writeFile(join(root, narUrl), Buffer.from(await (await fetch(`${kilnUrl}${narUrl}`)).arrayBuffer()));
  narUrls.push(narUrl);
}
const mediumUrls: string[] = [];
for (let i = 0; i < MEDIUM_NARS; i++) {
  const text = await (await fetch(`${kilnUrl}/cache/main/${await upload(narOfFile(randomBytes(2 << 20)), `m-${i}`)}.narinfo`)).text();
  const narUrl = `/cache/main/${/^URL: (.*)$/m.exec(text)![1]!}`;
  await writeFile(join(root, narUrl), Buffer.from(await (await fetch(`${kilnUrl}${narUrl}`)).arrayBuffer()));
  mediumUrls.push(narUrl);
}
const lists = { hits: hashes.map((h) => `/cache/main/${h}.narinfo`), misses: Array.from({ length: PATHS }, () => `/cache/main/${nix32(32)}.narinfo`), nars: narUrls, medium: mediumUrls };
for (const [name, paths] of Object.entries(lists)) await writeFile(join(work, `${name}.txt`), `${paths.join('\n')}\n`);
const script = join(work, 'paths.lua');
await writeFile(script, WRK_PATHS_SCRIPT);
const memoryAfterSetUp = await memory();
const nginxPort = await freePortForBench();
const nginx = await startNginx(work, root, nginxPort);
const nginxMaster = Number(readFileSync(join(work, 'nginx.pid'), 'utf8').trim());

// BENCH_HOLD=1: set up, print where things are and wait (for perf or a profiler by hand) until SIGINT.
if (process.env['BENCH_HOLD']) {
  console.log(JSON.stringify({ kilnPid: kiln.pid, kilnUrl, nginxUrl: nginx.url, nginxMaster, hits: join(work, 'hits.txt'), misses: join(work, 'misses.txt'), script }));
  await new Promise((resolve) => process.once('SIGINT', resolve));
  await nginx.stop();
  await kiln.stop();
  await rm(work, { recursive: true, force: true });
  process.exit(0);
}

type Server = 'kiln' | 'nginx';
const servers: [Server, string, () => number[]][] = [['kiln', kilnUrl, () => [kiln.pid]], ['nginx', nginx.url, () => nginxPids(nginxMaster)]];
const results: Record<string, { usPerRequest: number[]; rps: number[]; p99: number[]; byThread: Map<string, number[]>; routing: Record<string, number>; loopDelays: { main: number[]; mainMax: number; threads: number[]; threadsMax: number }[] }> = {};
const threadCounts = async () => (await kiln.request('threads')) as Record<string, number>;
const ALL_LISTS = ['hits', 'misses', 'nars', 'medium'] as const;
const LISTS = process.argv[5] === undefined ? ALL_LISTS : ALL_LISTS.filter((l) => process.argv[5]!.split(',').includes(l));
const connectionsOf = (list: (typeof ALL_LISTS)[number]) => (list === 'medium' ? 8 : 64);
for (const list of LISTS) {
  for (const [, url] of servers) await wrk(url, { connections: connectionsOf(list), seconds: 2, pathsFile: join(work, `${list}.txt`), script });
}
for (let round = 0; round < rounds; round++) {
  for (const list of LISTS) {
    for (const [server, url, pids] of round % 2 === 0 ? servers : [...servers].reverse()) {
      const countsBefore = server === 'kiln' ? await threadCounts() : {};
      const before = sumCpu(pids());
      // kiln's event-loop delays every second of the run: the main thread's and the worst serving thread's
      const delays = { main: [] as number[], mainMax: 0, threads: [] as number[], threadsMax: 0 };
      let running = true;
      const sampling = server === 'kiln' ? (async () => {
        await kiln.request('loop');
        while (running) {
          await new Promise((r) => setTimeout(r, 1000));
          const main = (await kiln.request('loop')) as { p99Ms: number; maxMs: number };
          const c = await threadCounts();
          delays.main.push(main.p99Ms);
          delays.mainMax = Math.max(delays.mainMax, main.maxMs);
          delays.threads.push(c['loopDelayP99Ms'] ?? 0);
          delays.threadsMax = Math.max(delays.threadsMax, c['loopDelayMaxMs'] ?? 0);
        }
      })() : Promise.resolve();
      const r = await wrk(url, { connections: connectionsOf(list), seconds, pathsFile: join(work, `${list}.txt`), script });
      running = false;
      await sampling;
      const after = sumCpu(pids());
      const entry = (results[`${list}|${server}`] ??= { usPerRequest: [], rps: [], p99: [], byThread: new Map(), routing: { wrk: 0 }, loopDelays: [] });
      entry.routing['wrk']! += r.requests;
      if (server === 'kiln') for (const [k, v] of Object.entries(await threadCounts())) entry.routing[k] = (entry.routing[k] ?? 0) + v - (countsBefore[k] ?? 0);
      let total = 0;
      for (const [name, ms] of after) {
        const spent = ms - (before.get(name) ?? 0);
        total += spent;
        const perRequest = entry.byThread.get(name) ?? [];
        perRequest.push((spent * 1000) / r.requests);
        entry.byThread.set(name, perRequest);
      }
      entry.usPerRequest.push((total * 1000) / r.requests);
      if (server === 'kiln') entry.loopDelays.push(delays);
      entry.rps.push(r.rps);
      entry.p99.push(r.p99Ms);
    }
  }
  console.error(`round ${round + 1}/${rounds} done, load average ${loadAverage()}`);
}
const rssAfter = processUsage(kiln.pid).rssBytes;
await new Promise((r) => setTimeout(r, 1500)); // the threads' memory figures are a second old at most
const memoryAfter = await memory();
const mainHeapUsedAfterGc = mib((await kiln.request('gc')) as number);
for (const list of LISTS) {
  const k = results[`${list}|kiln`]!;
  const n = results[`${list}|nginx`]!;
  const perThread = (e: typeof k) => Object.fromEntries([...e.byThread].map(([name, xs]) => [name, +median(xs).toFixed(2)]).filter(([, v]) => Number(v) > 0.05));
  console.log(JSON.stringify({
    bench: 'cpu-per-request', scenario: list, threads: threads ?? 'default', loadAverage: loadAverage(),
    kiln: { cpuUsPerRequest: +median(k.usPerRequest).toFixed(2), rounds: k.usPerRequest.map((x) => +x.toFixed(2)), rps: Math.round(median(k.rps)), p99Ms: median(k.p99), byThread: perThread(k), routing: k.routing,
      loopDelayMs: {
        mainP99: +median(k.loopDelays.flatMap((d) => d.main)).toFixed(1), mainMax: +Math.max(...k.loopDelays.map((d) => d.mainMax)).toFixed(1),
        threadsP99: +median(k.loopDelays.flatMap((d) => d.threads)).toFixed(1), threadsMax: +Math.max(...k.loopDelays.map((d) => d.threadsMax)).toFixed(1),
      } },
    nginx: { cpuUsPerRequest: +median(n.usPerRequest).toFixed(2), rounds: n.usPerRequest.map((x) => +x.toFixed(2)), rps: Math.round(median(n.rps)), p99Ms: median(n.p99), byThread: perThread(n) },
    kilnOverNginx: +(median(k.usPerRequest) / median(n.usPerRequest)).toFixed(3),
  }));
}
console.log(JSON.stringify({ bench: 'cpu-per-request', kilnRssMiB: { atRest: mib(rssAtRest), afterRuns: mib(rssAfter) }, memoryMiB: { atRest: memoryAtRest, afterSetUp: memoryAfterSetUp, afterRuns: memoryAfter, mainHeapUsedAfterGc } }));
await nginx.stop();
await kiln.stop();
await rm(work, { recursive: true, force: true });
process.exit(0);
