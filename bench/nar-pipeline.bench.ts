// NAR ingest throughput: read + parse + NarHash + listing + zstd + FileHash in one pass
// (protocol/nix ingestNar), against the fastest standard tools for the same stages piped together
// (`zstd -1 -T2 | openssl dgst -sha256`: OpenSSL's SHA-256 uses SHA-NI where coreutils' sha256sum
// does not) and node:crypto SHA-256 alone, in the same run with interleaved rounds (the machine's
// speed drifts), medians reported. Then Ed25519 narinfo signing and verification per second.
//
//   npx tsx bench/nar-pipeline.bench.ts [sizeMiB=512] [rounds=5]
//
// The data set is generated once under bench/data/ (gitignored): a tree of compressible text,
// incompressible random files, many small files, executables and symlinks, dumped to a NAR.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync, mkdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { once } from 'node:events';
import { loadAverage } from './childServer.js';
import { hashNar, ingestNar, narinfoFingerprint, SigningKey, verifyNarinfo } from '../protocol/index.js';
import { dumpNar } from '../worker/index.js';

const sizeMiB = Number(process.argv[2] ?? 512);
const rounds = Number(process.argv[3] ?? 5);
const dataDir = join(import.meta.dirname, 'data');
const treeDir = join(dataDir, `nar-tree-${sizeMiB}m`);
const narFile = join(dataDir, `pipeline-${sizeMiB}m.nar`);
const READ = { highWaterMark: 1 << 20 };

/** Deterministic bytes so every run measures the same tree. */
function prng(seed: number) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return s >>> 0;
  };
}

function randomBytes(n: number, next: () => number): Buffer {
  const out = Buffer.allocUnsafe(n + 4);
  for (let i = 0; i < n; i += 4) out.writeUInt32LE(next(), i);
  return out.subarray(0, n);
}

const WORDS = 'the quick brown fox jumps over lazy dog nix store path derivation output hash build cache kiln narinfo zstd'.split(' ');
function text(n: number, next: () => number): Buffer {
  const parts: string[] = [];
  let len = 0;
  while (len < n) {
    const line = `${Array.from({ length: 8 + (next() % 8) }, () => WORDS[next() % WORDS.length]).join(' ')} ${next() % 100000}\n`;
    parts.push(line);
    len += line.length;
  }
  return Buffer.from(parts.join('')).subarray(0, n);
}

function generateTree(): void {
  if (existsSync(treeDir)) return;
  const next = prng(42);
  const budget = sizeMiB << 20;
  let written = 0;
  const tmp = `${treeDir}.tmp`;
  rmSync(tmp, { recursive: true, force: true });
  // ~45% compressible text, ~45% random in large files, ~10% as many small files.
  for (let d = 0; written < budget; d++) {
    const dir = join(tmp, `pkg-${d}`, 'share', 'data');
    mkdirSync(join(tmp, `pkg-${d}`, 'bin'), { recursive: true });
    mkdirSync(dir, { recursive: true });
    for (let f = 0; f < 2 && written < budget; f++) {
      const size = 4 << 20;
      writeFileSync(join(dir, `text-${f}.txt`), text(size, next));
      writeFileSync(join(dir, `blob-${f}.bin`), randomBytes(size, next));
      written += 2 * size;
    }
    for (let f = 0; f < 400 && written < budget; f++) {
      const size = 512 + (next() % 4096);
      writeFileSync(join(tmp, `pkg-${d}`, `small-${f}`), next() % 2 ? text(size, next) : randomBytes(size, next));
      written += size;
    }
    writeFileSync(join(tmp, `pkg-${d}`, 'bin', 'run'), '#!/bin/sh\nexec true\n', { mode: 0o755 });
    symlinkSync('../share/data/text-0.txt', join(tmp, `pkg-${d}`, 'bin', 'link'));
  }
  execFileSync('mv', [tmp, treeDir]);
}

async function dumpTree(): Promise<void> {
  if (existsSync(narFile)) return;
  const out = createWriteStream(`${narFile}.tmp`);
  for await (const chunk of dumpNar(treeDir)) if (!out.write(chunk)) await once(out, 'drain');
  out.end();
  await once(out, 'finish');
  execFileSync('mv', [`${narFile}.tmp`, narFile]);
}

const ms = async (run: () => unknown): Promise<number> => {
  const t0 = performance.now();
  await run();
  return performance.now() - t0;
};
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? NaN;

const BASELINE = 'zstd -1 -T2 | openssl dgst -sha256';
const runs: Record<string, () => Promise<unknown>> = {
  [BASELINE]: async () => execFileSync('sh', ['-c', `zstd -1 -T2 -q -c '${narFile}' | openssl dgst -sha256`]),
  'node sha256 only': async () => {
    const hash = createHash('sha256');
    for await (const chunk of createReadStream(narFile, READ)) hash.update(chunk as Buffer);
    return hash.digest();
  },
  'kiln hashNar (parse+sha256)': () => hashNar(createReadStream(narFile, READ)),
  'kiln ingestNar zstd-1': () => ingestNar(createReadStream(narFile, READ), async () => undefined, { zstdLevel: 1 }),
  'kiln ingestNar zstd-3': () => ingestNar(createReadStream(narFile, READ), async () => undefined, { zstdLevel: 3 }),
};

function perSecond(run: () => unknown): number {
  let n = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < 1000) {
    for (let i = 0; i < 100; i++) run();
    n += 100;
  }
  return Math.round((n * 1000) / (performance.now() - t0));
}

async function main(): Promise<void> {
  mkdirSync(dataDir, { recursive: true });
  let t0 = performance.now();
  generateTree();
  await dumpTree();
  const narBytes = statSync(narFile).size;
  console.error(`data ready in ${Math.round(performance.now() - t0)} ms: ${narFile} (${(narBytes / 2 ** 20).toFixed(0)} MiB)`);

  for (const run of Object.values(runs)) await run(); // warm the page cache and the JIT
  const times: Record<string, number[]> = Object.fromEntries(Object.keys(runs).map((k) => [k, []]));
  for (let round = 0; round < rounds; round++) {
    // The run that goes first rotates from round to round.
    const order = Object.entries(runs);
    for (const [name, run] of [...order.slice(round % order.length), ...order.slice(0, round % order.length)]) times[name]!.push(await ms(run));
    console.error(`round ${round + 1}/${rounds} done`);
  }
  const table = Object.entries(times).map(([name, xs]) => ({
    name,
    medianMs: Math.round(median(xs)),
    MiBps: Math.round(narBytes / 2 ** 20 / (median(xs) / 1000)),
    // the median of the rounds' time ratios to the baseline run of the same round
    vsBaseline: Number(median(xs.map((x, i) => x / times[BASELINE]![i]!)).toFixed(2)),
  }));

  const key = SigningKey.generate('bench-1');
  const info = {
    storePath: '/nix/store/2wgwwrzq33820k7hi44rfakjcgd5cyrc-kiln-fixture-file',
    narHash: 'sha256:04zwf782yjwnh3q6hz5izfd6jyip8kgw6g6yj43fiqhbyhdd0dqw',
    narSize: 120,
    references: ['2wgwwrzq33820k7hi44rfakjcgd5cyrc-kiln-fixture-file', '9b65k7anny3l686i7x8fwirgar8l531z-kiln-fixture-refs'],
  };
  const sig = key.sign(narinfoFingerprint(info));
  const signing = {
    signPerSec: perSecond(() => key.sign(narinfoFingerprint(info))),
    verifyPerSec: perSecond(() => verifyNarinfo({ ...info, sigs: [sig] }, [key.publicKey])),
  };
  console.table(table);
  console.log(JSON.stringify({ bench: 'nar-pipeline', narMiB: Math.round(narBytes / 2 ** 20), rounds, loadAverage: loadAverage(), results: table, signing }));
}

await main();
