// Ingest of a 512 MiB NAR by chunked upload (32 MiB chunks from a client process running the CLI's
// uploadNar, bench/chunkedUpload.ts, then finalize:
// parse, NarHash, listing, reference scan, zstd, FileHash, durable blob, rows) against the fastest
// standard tools for the same stages, `zstd -1 -T2 | openssl dgst -sha256` over the same bytes
// (coreutils' sha256sum does not use SHA-NI and would make the baseline slow), interleaved rounds
// alternating which goes first, medians. Two kiln figures: the ingest (the client's first request
// to the finalize answer) and the whole client command (its process start and module loading too). Each round's path is deleted afterwards, so every
// round stores its blob (the same NAR in a new cache would otherwise find the blob stored).
//   npx tsx bench/narIngest.bench.ts [rounds]      (needs bench/data/pipeline-512m.nar: run nar-pipeline.bench.ts once)
import { execFile } from 'node:child_process';
import { createReadStream, existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { hashNar } from '../protocol/index.js';
import { startBenchKiln } from './benchKiln.js';
import { loadAverage } from './childServer.js';
import { median } from './loadTools.js';

const rounds = Number(process.argv[2] ?? 3);
const narFile = join(import.meta.dirname, 'data', 'pipeline-512m.nar');
if (!existsSync(narFile)) throw new Error(`${narFile} is missing: run \`npx tsx bench/nar-pipeline.bench.ts\` once to generate it`);
const bytes = statSync(narFile).size;
const digest = await hashNar(createReadStream(narFile, { highWaterMark: 1 << 20 }));
const run = promisify(execFile);

const bench = await startBenchKiln({ 'nar.maxUploadSize': 1 << 30 });
const baseline: number[] = [];
const kiln: number[] = [];
const ingest: number[] = [];
const timed = async (work: () => Promise<unknown>) => {
  const t0 = performance.now();
  await work();
  return performance.now() - t0;
};
await run('sh', ['-c', `cat '${narFile}' > /dev/null`]); // the page cache, for both
const runBaseline = async () => {
  baseline.push(await timed(() => run('sh', ['-c', `zstd -1 -T2 -q -c '${narFile}' | openssl dgst -sha256`])));
};
const runKiln = async (round: number) => {
  // A cache per round: the same path in the same cache would be "held" and skip the work.
  const cache = `ingest-${round}`;
  await bench.createCache(cache);
  const hash = '0c8mpcmk6vjh4wvcr8rdl91nr2ksdqk0';
  const narinfo = JSON.stringify({ store_path: `/nix/store/${hash}-bench-512m`, nar_hash: digest.narHash, nar_size: digest.narSize, references: [] });
  kiln.push(await timed(async () => {
    const { stdout } = await run(process.execPath, ['--import', import.meta.resolve('tsx'), join(import.meta.dirname, 'chunkedUpload.ts'), bench.kiln.url, bench.token, cache, narFile, narinfo], { maxBuffer: 1 << 20 });
    const p = JSON.parse(stdout) as { chunksMs: number; finalizeMs: number; cpuMs: number };
    ingest.push(p.chunksMs + p.finalizeMs);
    console.error(`  kiln: chunks ${Math.round(p.chunksMs)} ms + finalize ${Math.round(p.finalizeMs)} ms; client CPU ${Math.round(p.cpuMs)} ms`);
  }));
  const removed = await fetch(`${bench.kiln.url}/api/v1/caches/${cache}/nars/${hash}`, { method: 'DELETE', headers: { authorization: `Bearer ${bench.token}` } });
  if (!removed.ok) throw new Error(`deleting the path: ${removed.status} ${await removed.text()}`);
  await new Promise((r) => setTimeout(r, 1000)); // the blob goes after the answer
  const [left] = await bench.sql<{ n: number }[]>`select count(*)::int as n from cached_paths`;
  if (left!.n !== 0) throw new Error('the deleted path is still stored: the next round would not store its blob');
};
for (let round = 0; round < rounds; round++) {
  // Which goes first alternates, so neither always runs on the page cache and memory the other left.
  if (round % 2 === 0) {
    await runBaseline();
    await runKiln(round);
  } else {
    await runKiln(round);
    await runBaseline();
  }
  console.error(`round ${round + 1}/${rounds}: baseline ${Math.round(baseline.at(-1)!)} ms, kiln ingest ${Math.round(ingest.at(-1)!)} ms, command ${Math.round(kiln.at(-1)!)} ms`);
}
const mib = bytes / 2 ** 20;
const roundRatios = (kilnMs: number[]) => kilnMs.map((k, i) => +(baseline[i]! / k).toFixed(3));
console.log(JSON.stringify({
  bench: 'nar-ingest', narMiB: Math.round(mib), rounds, loadAverage: loadAverage(),
  baseline: { what: 'zstd -1 -T2 | openssl dgst -sha256', ms: Math.round(median(baseline)), MiBps: Math.round(mib / (median(baseline) / 1000)) },
  kilnIngest: { what: 'chunked upload (32 MiB) + finalize', ms: Math.round(median(ingest)), MiBps: Math.round(mib / (median(ingest) / 1000)) },
  kilnCommand: { what: 'the client process, start to exit', ms: Math.round(median(kiln)), MiBps: Math.round(mib / (median(kiln) / 1000)) },
  // throughput kiln / baseline of each round, whose two runs were back to back, and their median
  ingestRoundRatios: roundRatios(ingest), ingestRatio: median(roundRatios(ingest)),
  commandRoundRatios: roundRatios(kiln), commandRatio: median(roundRatios(kiln)),
  ingestRatioOfMedians: +(median(baseline) / median(ingest)).toFixed(3),
}));
await bench.stop();
