// Serving the binary cache: narinfo hits and misses at 64 connections, and NAR file throughput,
// kiln against nginx (a worker per core, sendfile) serving the very same files. Both are warmed
// up, rounds interleave them and alternate which goes first, and the figure is the median of the
// rounds' kiln / nginx ratios. Load comes from wrk in its own process. Each scenario also says
// where kiln's requests went (kilnRouting: the serving threads' memory answers, relays and NAR
// files, and the main thread's own listener) and how the threads' event loops fared while kiln
// ran (kilnThreads: the medians, over the seconds of its runs, of each thread's event-loop delay at
// the 99th percentile, its longest, and its garbage collections a second with the longest pause;
// and per run the busiest thread's share of the requests; and over all of kiln's runs the threads'
// collections and collection milliseconds per 100,000 requests, gcPer100k and gcMsPer100k).
//   npx tsx bench/binaryCache.bench.ts [seconds] [rounds] [scenario words|all] [http.threads] [nar.smallBytes]
// (the third argument picks scenarios whose name contains one of the comma-separated words, e.g.
// "miss,16"; the fourth sets kiln's serving threads, its default when absent, the fifth nar.smallBytes)
import { randomBytes } from 'node:crypto';
import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { SERVE_V8_FLAGS } from '../bin/serveFlags.js';
import { encodeNarStrings, encodeU64, hashNar, narPadding, NIX32_ALPHABET } from '../protocol/index.js';
import { loadAverage } from './childServer.js';
import { freePortForBench } from './freePort.js';
import { startBenchKiln } from './benchKiln.js';
import { median, startNginx, wrk, WRK_PATHS_SCRIPT } from './loadTools.js';

// kiln runs in this process: with the V8 options `kiln serve` runs with (bin/serveFlags.js; V8 reads
// them at each collection), unless BENCH_NODE_DEFAULTS=1
if (process.env['BENCH_NODE_DEFAULTS'] !== '1') for (const flag of SERVE_V8_FLAGS) setFlagsFromString(flag);

const seconds = Number(process.argv[2] ?? 5);
const rounds = Number(process.argv[3] ?? 3);
const SMALL_PATHS = 1000;
const LARGE_NARS = 8;
const threads = process.argv[5] === undefined ? undefined : Number(process.argv[5]);
/** nar.smallBytes (sixth argument): NAR files up to it stay in memory, the serving threads' included */
const smallBytes = process.argv[6] === undefined ? undefined : Number(process.argv[6]);

const nix32 = (n: number) => Array.from(randomBytes(n), (b) => NIX32_ALPHABET[b & 31]).join('');
const narOfFile = (contents: Buffer) => Buffer.concat([
  encodeNarStrings('nix-archive-1', '(', 'type', 'regular', 'contents'), encodeU64(contents.length), contents,
  Buffer.alloc(narPadding(contents.length)), encodeNarStrings(')'),
]);

const bench = await startBenchKiln({
  'nar.maxUploadSize': 64 << 20, ...(threads === undefined ? {} : { 'http.threads': threads }), ...(smallBytes === undefined ? {} : { 'nar.smallBytes': smallBytes }),
});
await bench.createCache('bench');
const { kiln, token } = bench;

/**
 * Uploads that a serving thread relays were seen reset mid-request (ECONNRESET, or the thread's 502
 * when its loopback connection was reset; http.threads 2): the setup retries them and says how
 * many, so the serving figures still come.
 */
let uploadResets = 0;
async function upload(nar: Buffer, name: string): Promise<{ hash: string; fileHash: string }> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await uploadOnce(nar, name);
    } catch (e) {
      if (attempt >= 5 || !(e instanceof TypeError || (e instanceof Error && e.message.startsWith('upload: 502')))) throw e;
      uploadResets++;
    }
  }
}

async function uploadOnce(nar: Buffer, name: string): Promise<{ hash: string; fileHash: string }> {
  const hash = nix32(32);
  const digest = await hashNar([nar]);
  const form = new FormData();
  form.append('narinfo', JSON.stringify({ store_path: `/nix/store/${hash}-${name}`, nar_hash: digest.narHash, nar_size: digest.narSize, references: [] }));
  form.append('nar', new Blob([nar]), 'x.nar');
  const res = await fetch(`${kiln.url}/api/v1/caches/bench/nars`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: form });
  if (!res.ok) throw new Error(`upload: ${res.status} ${await res.text()}`);
  return { hash, fileHash: ((await res.json()) as { message: { file_hash: string } }).message.file_hash };
}

const work = await mkdtemp(join(tmpdir(), 'kiln-bench-serve-'));
const root = join(work, 'www');
await mkdir(join(root, 'cache', 'bench', 'nar'), { recursive: true });
const small: { hash: string; fileHash: string }[] = [];
for (let i = 0; i < SMALL_PATHS; i += 8) {
  small.push(...(await Promise.all(Array.from({ length: 8 }, (_, j) => upload(narOfFile(randomBytes(1024 + ((i + j) % 3072))), `small-${i + j}`)))));
}
const large: { hash: string; fileHash: string }[] = [];
for (let i = 0; i < LARGE_NARS; i++) large.push(await upload(narOfFile(randomBytes(16 << 20)), `large-${i}`));
const medium: { hash: string; fileHash: string }[] = [];
for (let i = 0; i < LARGE_NARS; i++) medium.push(await upload(narOfFile(randomBytes(2 << 20)), `medium-${i}`));
// nginx serves kiln's own bytes: the narinfo text kiln answers, and kiln's stored NAR files.
for (const { hash, fileHash } of [...small, ...large, ...medium]) {
  const text = await (await fetch(`${kiln.url}/cache/bench/${hash}.narinfo`)).text();
  await writeFile(join(root, 'cache', 'bench', `${hash}.narinfo`), text);
  await copyFile(join(bench.baseDir, 'blobs', 'nar', `${fileHash}.nar.zst`), join(root, 'cache', 'bench', 'nar', `${fileHash}.nar.zst`));
}
if (uploadResets > 0) console.error(`${uploadResets} upload(s) reset and retried`);
const lists = {
  hits: small.map((p) => `/cache/bench/${p.hash}.narinfo`),
  misses: Array.from({ length: SMALL_PATHS }, () => `/cache/bench/${nix32(32)}.narinfo`),
  smallNars: small.map((p) => `/cache/bench/nar/${p.fileHash}.nar.zst`),
  largeNars: large.map((p) => `/cache/bench/nar/${p.fileHash}.nar.zst`),
  mediumNars: medium.map((p) => `/cache/bench/nar/${p.fileHash}.nar.zst`),
};
for (const [name, paths] of Object.entries(lists)) await writeFile(join(work, `${name}.txt`), `${paths.join('\n')}\n`);
const script = join(work, 'paths.lua');
await writeFile(script, WRK_PATHS_SCRIPT);
const nginx = await startNginx(work, root, await freePortForBench());

const only = process.argv[4] === undefined || process.argv[4] === 'all' ? null : process.argv[4].split(',');
const scenarios = [
  { name: 'narinfo hit', list: 'hits', connections: 64 },
  { name: 'narinfo miss (404)', list: 'misses', connections: 64 },
  { name: 'NAR 1-4 KiB', list: 'smallNars', connections: 64 },
  { name: 'NAR 2 MiB, 8 conn', list: 'mediumNars', connections: 8 },
  { name: 'NAR 2 MiB, 64 conn', list: 'mediumNars', connections: 64 },
  { name: 'NAR 16 MiB, 8 conn', list: 'largeNars', connections: 8 },
  { name: 'NAR 16 MiB, 64 conn', list: 'largeNars', connections: 64 },
].filter((s) => only === null || only.some((word) => s.name.includes(word)));
type Sample = { rps: number[]; p50: number[]; p99: number[]; mbps: number[]; non2xx: number; socketErrors: number };
/** kiln / nginx of each round, whose two runs were back to back: steadier than a ratio of medians on a busy machine */
const roundRatios: Record<string, number[]> = {};
const samples: Record<string, Sample> = {};
const record = (key: string, r: Awaited<ReturnType<typeof wrk>>) => {
  const s = (samples[key] ??= { rps: [], p50: [], p99: [], mbps: [], non2xx: 0, socketErrors: 0 });
  s.rps.push(r.rps); s.p50.push(r.p50Ms); s.p99.push(r.p99Ms); s.mbps.push(r.bytesPerSec / 1e6); s.non2xx += r.non2xx; s.socketErrors += r.socketErrors;
};
const servers = [['nginx', nginx.url], ['kiln', kiln.url]] as const;
/**
 * Where kiln's requests went: the serving threads' counters (GET /api/v1/admin/actors), summed.
 * What wrk sent beyond `requests` the main thread's own listener took.
 */
type ThreadCounts = { requests: number; fromMemory: number; forwarded: number; nars: number; narsFromMemory: number; gcTotal: number; gcTotalMs: number };
const COUNTED = ['requests', 'fromMemory', 'forwarded', 'nars', 'narsFromMemory', 'gcTotal', 'gcTotalMs'] as const;
const threadCounts = (): ThreadCounts => {
  const threadsNode = kiln.root.inspect().children.find((c) => c.id === 'http-threads');
  const nodes = threadsNode !== undefined && 'children' in threadsNode ? threadsNode.children : [];
  const sum = (field: keyof ThreadCounts) => nodes.reduce((n, node) => n + Number(('summary' in node ? node.summary?.[field] : 0) ?? 0), 0);
  return Object.fromEntries(COUNTED.map((field) => [field, sum(field)])) as ThreadCounts;
};
const routed: Record<string, { wrk: number } & ThreadCounts> = {};
/** Requests each thread began: the kernel spreads connections over the threads' listeners by a hash, not by load. */
const perThreadRequests = (): number[] => {
  const threadsNode = kiln.root.inspect().children.find((c) => c.id === 'http-threads');
  const nodes = threadsNode !== undefined && 'children' in threadsNode ? threadsNode.children : [];
  return nodes.map((node) => Number(('summary' in node ? node.summary?.['requests'] : 0) ?? 0));
};
/** Per kiln run, the busiest thread's share of the requests (0.5 is even with two threads). */
const busiestShares: Record<string, number[]> = {};
/** Each thread's figures of the last second (servingThread.ts writes them every second), sampled while kiln runs. */
const LOOP_FIGURES = ['loopDelayP99Ms', 'loopDelayMaxMs', 'gcCount', 'gcMaxMs'] as const;
const loopSamples: Record<string, Record<(typeof LOOP_FIGURES)[number], number[]>> = {};
const sampleLoops = (scenario: string): NodeJS.Timeout => setInterval(() => {
  const threadsNode = kiln.root.inspect().children.find((c) => c.id === 'http-threads');
  const nodes = threadsNode !== undefined && 'children' in threadsNode ? threadsNode.children : [];
  const into = (loopSamples[scenario] ??= { loopDelayP99Ms: [], loopDelayMaxMs: [], gcCount: [], gcMaxMs: [] });
  for (const node of nodes) for (const figure of LOOP_FIGURES) into[figure].push(Number(('summary' in node ? node.summary?.[figure] : 0) ?? 0));
}, 1000);
for (const s of scenarios) {
  for (const [, url] of servers) await wrk(url, { connections: s.connections, seconds: 1, pathsFile: join(work, `${s.list}.txt`), script }); // warm-up
}
for (let round = 0; round < rounds; round++) {
  for (const s of scenarios) {
    // Which goes first alternates: the second run of a pair meets what the first left behind.
    for (const [server, url] of round % 2 === 0 ? servers : [...servers].reverse()) {
      const before = threadCounts();
      const sampling = server === 'kiln' ? sampleLoops(s.name) : null;
      const threadsBefore = perThreadRequests();
      const result = await wrk(url, { connections: s.connections, seconds, pathsFile: join(work, `${s.list}.txt`), script });
      if (sampling !== null) {
        clearInterval(sampling);
        const done = perThreadRequests().map((n, i) => n - (threadsBefore[i] ?? 0));
        const total = done.reduce((a, b) => a + b, 0);
        if (total > 0) (busiestShares[s.name] ??= []).push(+(Math.max(...done) / total).toFixed(3));
      }
      record(`${s.name}|${server}`, result);
      if (server === 'kiln') {
        const after = threadCounts();
        const r = (routed[s.name] ??= { wrk: 0, requests: 0, fromMemory: 0, forwarded: 0, nars: 0, narsFromMemory: 0, gcTotal: 0, gcTotalMs: 0 });
        r.wrk += result.requests;
        for (const field of COUNTED) r[field] += after[field] - before[field];
      }
    }
    (roundRatios[s.name] ??= []).push(+(samples[`${s.name}|kiln`]!.rps.at(-1)! / samples[`${s.name}|nginx`]!.rps.at(-1)!).toFixed(3));
  }
  console.error(`round ${round + 1}/${rounds} done`);
}
const routing = ({ gcTotal: _count, gcTotalMs: _ms, ...where }: { wrk: number } & ThreadCounts) => where;
/**
 * The threads' garbage collections and their summed pauses per 100,000 requests they began, over
 * kiln's runs: what a request allocates and how long the collector holds the threads, without the
 * machine's load in it as much as a p99 (issue 22).
 */
const perHundredThousand = (r: ({ wrk: number } & ThreadCounts) | undefined) => r === undefined || r.requests === 0 ? {} : {
  gcPer100k: +(r.gcTotal / r.requests * 1e5).toFixed(1), gcMsPer100k: +(r.gcTotalMs / r.requests * 1e5).toFixed(1),
};
for (const s of scenarios) {
  const n = samples[`${s.name}|nginx`]!;
  const k = samples[`${s.name}|kiln`]!;
  const figures = (x: Sample) => ({ rps: Math.round(median(x.rps)), MBps: Math.round(median(x.mbps)), p50Ms: median(x.p50), p99Ms: median(x.p99), non2xx: x.non2xx, socketErrors: x.socketErrors });
  console.log(JSON.stringify({
    bench: 'binary-cache', scenario: s.name, connections: s.connections, threads: threads ?? 'default', smallBytes: smallBytes ?? 'default', loadAverage: loadAverage(),
    nginx: figures(n), kiln: figures(k),
    ratio: median(roundRatios[s.name]!), roundRatios: roundRatios[s.name], ratioOfMedians: +(median(k.rps) / median(n.rps)).toFixed(3),
    // kiln's requests over all rounds: the threads' (narinfos from memory, relayed, NAR files sent and
    // of those from memory) and the main thread's own listener's (wrk's count is of answers finished,
    // the threads' of requests begun: with few long answers the difference can be negative)
    ...(routed[s.name] === undefined ? {} : { kilnRouting: { ...routing(routed[s.name]!), mainListener: routed[s.name]!.wrk - routed[s.name]!.requests } }),
    ...(loopSamples[s.name] === undefined ? {} : { kilnThreads: { ...Object.fromEntries(LOOP_FIGURES.map((f) => [f, +median(loopSamples[s.name]![f]).toFixed(2)])), ...perHundredThousand(routed[s.name]), busiestShare: busiestShares[s.name] ?? [] } }),
  }));
}
await nginx.stop();
await bench.stop();
await rm(work, { recursive: true, force: true });
