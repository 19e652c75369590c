// `nix copy --from` of a closure of about 200 small store paths into a fresh store: from kiln,
// against nginx serving the tree `nix copy --to file://` wrote of the same closure (zstd, as kiln
// stores; a worker per core), both warmed up (kiln until each serving thread served a copy),
// interleaved rounds alternating which goes first, the median of the rounds' ratios; per kiln copy
// the NAR requests that waited for a thread's grant and the requests the threads relayed, and
// `nixTimedRatio`, the same ratio by the shell's timing of Nix alone. Needs
// root, Nix (Debian nix-bin) and nginx (nginx-light).
//   npx tsx bench/nixCopy.bench.ts [rounds=3] [leaves=180]
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildBenchClosure, commandOutput } from './benchClosure.js';
import { startBenchKiln } from './benchKiln.js';
import { freePortForBench } from './freePort.js';
import { median, startNginx } from './loadTools.js';

const rounds = Number(process.argv[2] ?? 3);
const leaves = Number(process.argv[3] ?? 180);

const NIX_OPTIONS = [
  '--option', 'sandbox', 'false', '--option', 'build-users-group', '', '--option', 'substituters', '',
  // Every copy asks the server afresh instead of Nix's own narinfo cache.
  '--option', 'narinfo-cache-negative-ttl', '0', '--option', 'narinfo-cache-positive-ttl', '0',
];

/** A Nix command with the bench's options; its stdout. */
const nix = (command: 'nix' | 'nix-build' | 'nix-store', args: string[], env: NodeJS.ProcessEnv = {}): Promise<string> =>
  commandOutput(command, [...(command === 'nix' ? ['--extra-experimental-features', 'nix-command'] : []), ...NIX_OPTIONS, ...args], env);

const work = await mkdtemp(join(tmpdir(), 'kiln-bench-copy-'));
const { root, closure } = await buildBenchClosure(work, leaves, NIX_OPTIONS);

const bench = await startBenchKiln();
await bench.createCache('bench');
const netrc = join(work, 'netrc');
await writeFile(netrc, `machine 127.0.0.1\nlogin bench\npassword ${bench.token}\n`, { mode: 0o600 });
await nix('nix', ['copy', '--option', 'netrc-file', netrc, '--to', `${bench.kiln.url}/cache/bench?compression=zstd`, root]);
const www = join(work, 'www');
await mkdir(join(www, 'cache'), { recursive: true });
await nix('nix', ['copy', '--to', `file://${join(www, 'cache', 'bench')}?compression=zstd`, root]);
const nginx = await startNginx(work, www, await freePortForBench());

/**
 * Seconds to copy the closure from `url` into a fresh store: as this process saw it (kiln's main
 * thread is this process's event loop, so work kiln does after a copy can delay seeing Nix exit),
 * and as the shell that ran Nix timed it (Nix's own time, whatever this process was doing).
 */
async function copyFrom(url: string, n: number): Promise<{ seconds: number; nixSeconds: number }> {
  const store = join(work, `store-${n}`);
  const started = process.hrtime.bigint();
  const args = ['--extra-experimental-features', 'nix-command', ...NIX_OPTIONS, 'copy', '--no-check-sigs', '--from', url, '--to', store, root];
  const timed = await commandOutput('sh', ['-c', 'a=$(date +%s%N); "$@" >/dev/null || exit $?; b=$(date +%s%N); echo $((b - a))', 'sh', 'nix', ...args], { XDG_CACHE_HOME: join(work, `xdg-${n}`) });
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const copied = (await nix('nix', ['path-info', '--store', store, '--all'])).trim().split('\n').length;
  if (copied !== closure.length) throw new Error(`${url}: the fresh store holds ${copied} paths, not ${closure.length}`);
  await rm(store, { recursive: true, force: true });
  return { seconds, nixSeconds: Number(timed.trim()) / 1e9 };
}

/** Each serving thread's count of one summary field (GET /api/v1/admin/actors). */
function perThread(field: string): number[] {
  const threadsNode = bench.kiln.root.inspect().children.find((c) => c.id === 'http-threads');
  const nodes = threadsNode !== undefined && 'children' in threadsNode ? threadsNode.children : [];
  return nodes.map((node) => Number(('summary' in node ? node.summary?.[field] : 0) ?? 0));
}
const threadSum = (field: string): number => perThread(field).reduce((a, b) => a + b, 0);

const times: Record<'nginx' | 'kiln', number[]> = { nginx: [], kiln: [] };
/** the same copies as the shell running Nix timed them */
const nixTimes: Record<'nginx' | 'kiln', number[]> = { nginx: [], kiln: [] };
/** per kiln copy: NAR requests that waited for the main thread's grant (threadNars.ts), and those relayed to the main thread */
const narsWaited: number[] = [];
const relayed: number[] = [];
let n = 0;
// Warm-up of both: the page cache, nginx's open workers, kiln's hot cache.
await copyFrom(`${nginx.url}/cache/bench`, n++);
await copyFrom(`${bench.kiln.url}/cache/bench`, n++);
// Each serving thread keeps a memory of its own (narinfos, NAR grants, small NAR files) and a copy
// is one connection, which the kernel gives one thread: kiln is warm once every thread served a
// copy (a few more copies at most; the thread a round lands on is the kernel's choice).
// (The NAR files a thread sent tell, not its requests: the upload's went through the threads too.)
for (let extra = 0; extra < 6 && perThread('nars').some((sent) => sent === 0); extra++) {
  await copyFrom(`${bench.kiln.url}/cache/bench`, n++);
}
console.error(`kiln warmed up: NAR files sent per serving thread ${perThread('nars').join(', ')}`);
for (let round = 0; round < rounds; round++) {
  // Which goes first alternates: the second copy of a round starts right after the first one's
  // store was removed, which measurably changes its time on a machine that hands freed memory back.
  const order = [['nginx', `${nginx.url}/cache/bench`], ['kiln', `${bench.kiln.url}/cache/bench`]] as const;
  for (const [server, url] of round % 2 === 0 ? order : [...order].reverse()) {
    const [waitedBefore, relayedBefore] = [threadSum('narsWaited'), threadSum('forwarded')];
    const copy = await copyFrom(url, n++);
    times[server].push(copy.seconds);
    nixTimes[server].push(copy.nixSeconds);
    if (server === 'kiln') {
      narsWaited.push(threadSum('narsWaited') - waitedBefore);
      relayed.push(threadSum('forwarded') - relayedBefore);
    }
  }
  console.error(`round ${round + 1}/${rounds}: nginx ${times.nginx.at(-1)!.toFixed(2)} s, kiln ${times.kiln.at(-1)!.toFixed(2)} s`);
}
console.log(JSON.stringify({
  bench: 'nix-copy-from', paths: closure.length,
  nginxSeconds: +median(times.nginx).toFixed(3), kilnSeconds: +median(times.kiln).toFixed(3),
  // kiln / nginx time of each round, whose two copies ran back to back: steadier on a busy machine
  ratio: +median(times.kiln.map((k, i) => k / times.nginx[i]!)).toFixed(3),
  ratioOfMedians: +(median(times.kiln) / median(times.nginx)).toFixed(3),
  // the same by the shell's timing of Nix alone
  nixTimedRatio: +median(nixTimes.kiln.map((k, i) => k / nixTimes.nginx[i]!)).toFixed(3),
  all: times, nixTimed: nixTimes, kilnNarsWaited: narsWaited, kilnRelayed: relayed,
}));
await nginx.stop();
await bench.stop();
await rm(work, { recursive: true, force: true });
