// The evaluation pool under memory pressure (issue 23): a synthetic flake of `attributes` cheap
// derivations and `hogs` attributes that each allocate `hogGiB` before their derivation's name is
// known. The host is `poolOnlyHost`: `headroomMb` above worker.system.minFreeRamMb (1 GiB here) to
// spare, taken only by the pool's subprocesses at their real resident sizes, as on a worker whose
// memory is nearly taken (the machine's own available memory comes and goes with other work, which
// let a 1.5 GiB attribute through in one run and killed small calls in another). Goal: the evaluation completes with the hogs failed and
// every other attribute evaluated, no out-of-memory kill by the kernel (/proc/vmstat oom_kill),
// the pool's largest subprocess within the margin plus one call. Baseline in the same run: the
// same flake without the hogs, the same pool, for the cost of the evaluation itself.
//
//   npm run bench -- eval-pool [attributes=5000] [hogs=10] [hogGiB=1.5] [forkWorkers=cores≤16] [headroomMb=1024]
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAttributeWildcard } from '../protocol/index.js';
import { defaultForkWorkers, evaluateFlake } from '../worker/flakeEval.js';
import { checkoutCommit } from '../worker/gitCheckout.js';
import { poolOnlyHost, procMemoryProbe } from '../worker/memoryProbe.js';
import { loadAverage } from './childServer.js';

const attributes = Number(process.argv[2] ?? 5000);
const hogs = Number(process.argv[3] ?? 10);
const hogGiB = Number(process.argv[4] ?? 1.5);
const forkWorkers = Number(process.argv[5] ?? defaultForkWorkers());
const headroomMb = Number(process.argv[6] ?? 1024);
const MIB = 1024 * 1024;
/** Bytes a summed genList element costs Nix 2.8 (measured: 5 million elements, 626 MB resident). */
const BYTES_PER_ELEMENT = 125;

const env: NodeJS.ProcessEnv = { ...process.env, NIX_REMOTE: 'local', NIX_CONFIG: 'sandbox = false\nbuild-users-group =\nsubstituters =\n' };
const dir = mkdtempSync(join(tmpdir(), 'kiln-bench-eval-pool-'));
const nonce = randomUUID();
const oomKills = () => Number(/^oom_kill (\d+)$/m.exec(readFileSync('/proc/vmstat', 'utf8'))?.[1] ?? NaN);

function flake(withHogs: boolean): string {
  const drv = (name: string) => `derivation { name = ${name}; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" "echo > $out" ]; nonce = "${nonce}"; }`;
  const elements = Math.round((hogGiB * 1024 * MIB) / BYTES_PER_ELEMENT);
  const hogAttrs = withHogs ? `// builtins.listToAttrs (builtins.genList (i: { name = "hog\${toString i}"; value = ${drv(`"hog-\${toString (builtins.foldl' builtins.add i (builtins.genList (x: x) ${elements}))}"`)}; }) ${hogs})` : '';
  return `{ outputs = { self }: { packages.x86_64-linux = builtins.listToAttrs (builtins.genList (i: { name = "a\${toString i}"; value = ${drv('"a-${toString i}"')}; }) ${attributes}) ${hogAttrs}; }; }`;
}

async function run(name: string, withHogs: boolean) {
  const repoDir = join(dir, name);
  mkdirSync(repoDir, { recursive: true });
  const git = (args: string[]) => execFileSync('git', ['-C', repoDir, '-c', 'user.email=bench@kiln.invalid', '-c', 'user.name=bench', ...args], { encoding: 'utf8' }).trim();
  git(['init', '--quiet', '-b', 'main']);
  writeFileSync(join(repoDir, 'flake.nix'), flake(withHogs));
  git(['add', '.']);
  git(['commit', '--quiet', '-m', 'flake']);
  const checkout = await checkoutCommit(join(dir, 'worker'), randomUUID(), `file://${repoDir}`, git(['rev-parse', 'HEAD']), env);
  if (!checkout.ok) throw new Error(checkout.failure.message);
  const wildcard = parseAttributeWildcard('packages.x86_64-linux.*');
  if (!wildcard.ok) throw new Error(wildcard.reason);
  const available = procMemoryProbe.availableBytes();
  const minFreeBytes = 1024 * MIB;
  const oomBefore = oomKills();
  const started = performance.now();
  const memory = poolOnlyHost(minFreeBytes + headroomMb * MIB);
  const result = await evaluateFlake({ flakeRef: checkout.flakeRef, wildcard: wildcard.value, env, pool: { size: forkWorkers, minFreeBytes, memory } });
  const seconds = (performance.now() - started) / 1000;
  if (!result.ok) throw new Error(`${name}: ${result.failure.message}`);
  const failed = result.value.errors.map((e) => e.path[2] ?? '');
  return {
    run: name, seconds: Math.round(seconds * 10) / 10, evaluated: result.value.attributes.length, failed: failed.length,
    failedAreTheHogs: failed.every((n) => n.startsWith('hog')) && failed.length === (withHogs ? hogs : 0),
    calls: result.value.pool.calls, memoryKills: result.value.pool.memoryKills,
    peakSubprocessMiB: Math.round(result.value.pool.peakRssBytes / MIB), headroomMiB: headroomMb,
    availableAtStartMiB: Math.round(available / MIB), kernelOomKills: oomKills() - oomBefore, loadAverage: loadAverage(),
  };
}

try {
  console.log(JSON.stringify({ bench: 'eval-pool', attributes, hogs, hogGiB, forkWorkers, headroomMb }));
  console.log(JSON.stringify(await run('baseline-no-hogs', false)));
  console.log(JSON.stringify(await run('with-hogs', true)));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
