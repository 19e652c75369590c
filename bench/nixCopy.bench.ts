// `nix copy --from` of a closure of about 200 small store paths into a fresh store: from kiln,
// against nginx serving the tree `nix copy --to file://` wrote of the same closure (zstd, as kiln
// stores; a worker per core), both warmed up, interleaved rounds alternating which goes first, the
// median of the rounds' ratios. Needs root, Nix (Debian nix-bin) and nginx (nginx-light).
//   npx tsx bench/nixCopy.bench.ts [rounds=3] [leaves=180]
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startBenchKiln } from './benchKiln.js';
import { freePortForBench } from './freePort.js';
import { median, startNginx } from './loadTools.js';

const rounds = Number(process.argv[2] ?? 3);
const leaves = Number(process.argv[3] ?? 180);
const GROUP = 10;

const NIX_OPTIONS = [
  '--option', 'sandbox', 'false', '--option', 'build-users-group', '', '--option', 'substituters', '',
  // Every copy asks the server afresh instead of Nix's own narinfo cache.
  '--option', 'narinfo-cache-negative-ttl', '0', '--option', 'narinfo-cache-positive-ttl', '0',
];

/** Runs a Nix command without blocking this process (kiln answers Nix from it); its stdout. */
function nix(command: 'nix' | 'nix-build' | 'nix-store', args: string[], env: NodeJS.ProcessEnv = {}): Promise<string> {
  const full = [...(command === 'nix' ? ['--extra-experimental-features', 'nix-command'] : []), ...NIX_OPTIONS, ...args];
  return new Promise((resolve, reject) => {
    const child = spawn(command, full, { env: { ...process.env, NIX_REMOTE: 'local', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`${command} ${args.join(' ')} exited ${code}:\n${err.slice(-3000)}`))));
  });
}

// Leaves of a few bytes to ~100 KB, groups of ten leaves that refer to them, and one root.
const closureNix = (count: number) => String.raw`
let
  mk = name: script: derivation { inherit name; builder = "/bin/sh"; args = [ "-c" script ]; PATH = "/bin:/usr/bin"; system = builtins.currentSystem; };
  leaf = i: mk "kiln-bench-leaf-${'${toString i}'}" "mkdir -p $out/share; seq 1 ${'${toString (i * i)}'} > $out/share/numbers; echo leaf ${'${toString i}'} > $out/name";
  leaves = builtins.genList leaf ${count};
  group = g: mk "kiln-bench-group-${'${toString g}'}" (builtins.concatStringsSep "; " ([ "mkdir $out" ] ++ map (l: "echo ${'${l}'} >> $out/deps") (builtins.genList (j: builtins.elemAt leaves (g * ${GROUP} + j)) ${GROUP})));
  groups = builtins.genList group (${count} / ${GROUP});
in mk "kiln-bench-root" (builtins.concatStringsSep "; " ([ "mkdir $out" ] ++ map (g: "echo ${'${g}'} >> $out/deps") groups))
`;

const work = await mkdtemp(join(tmpdir(), 'kiln-bench-copy-'));
const expression = join(work, 'closure.nix');
await writeFile(expression, closureNix(leaves));
console.error('building the closure with nix-build');
const root = (await nix('nix-build', [expression, '--no-out-link', '--max-jobs', '2'])).trim();
const closure = (await nix('nix-store', ['-qR', root])).trim().split('\n');
console.error(`closure of ${root}: ${closure.length} paths`);

const bench = await startBenchKiln();
await bench.createCache('bench');
const netrc = join(work, 'netrc');
await writeFile(netrc, `machine 127.0.0.1\nlogin bench\npassword ${bench.token}\n`, { mode: 0o600 });
await nix('nix', ['copy', '--option', 'netrc-file', netrc, '--to', `${bench.kiln.url}/cache/bench?compression=zstd`, root]);
const www = join(work, 'www');
await mkdir(join(www, 'cache'), { recursive: true });
await nix('nix', ['copy', '--to', `file://${join(www, 'cache', 'bench')}?compression=zstd`, root]);
const nginx = await startNginx(work, www, await freePortForBench());

/** Seconds to copy the closure from `url` into a fresh store. */
async function copyFrom(url: string, n: number): Promise<number> {
  const store = join(work, `store-${n}`);
  const started = process.hrtime.bigint();
  await nix('nix', ['copy', '--no-check-sigs', '--from', url, '--to', store, root], { XDG_CACHE_HOME: join(work, `xdg-${n}`) });
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const copied = (await nix('nix', ['path-info', '--store', store, '--all'])).trim().split('\n').length;
  if (copied !== closure.length) throw new Error(`${url}: the fresh store holds ${copied} paths, not ${closure.length}`);
  await rm(store, { recursive: true, force: true });
  return seconds;
}

const times: Record<'nginx' | 'kiln', number[]> = { nginx: [], kiln: [] };
let n = 0;
// Warm-up of both: the page cache, nginx's open workers, kiln's hot cache.
await copyFrom(`${nginx.url}/cache/bench`, n++);
await copyFrom(`${bench.kiln.url}/cache/bench`, n++);
for (let round = 0; round < rounds; round++) {
  // Which goes first alternates: the second copy of a round starts right after the first one's
  // store was removed, which measurably changes its time on a machine that hands freed memory back.
  const order = [['nginx', `${nginx.url}/cache/bench`], ['kiln', `${bench.kiln.url}/cache/bench`]] as const;
  for (const [server, url] of round % 2 === 0 ? order : [...order].reverse()) {
    times[server].push(await copyFrom(url, n++));
  }
  console.error(`round ${round + 1}/${rounds}: nginx ${times.nginx.at(-1)!.toFixed(2)} s, kiln ${times.kiln.at(-1)!.toFixed(2)} s`);
}
console.log(JSON.stringify({
  bench: 'nix-copy-from', paths: closure.length,
  nginxSeconds: +median(times.nginx).toFixed(3), kilnSeconds: +median(times.kiln).toFixed(3),
  // kiln / nginx time of each round, whose two copies ran back to back: steadier on a busy machine
  ratio: +median(times.kiln.map((k, i) => k / times.nginx[i]!)).toFixed(3),
  ratioOfMedians: +(median(times.kiln) / median(times.nginx)).toFixed(3),
  all: times,
}));
await nginx.stop();
await bench.stop();
await rm(work, { recursive: true, force: true });
