// worker.gcrootsDir with real Nix: while a build runs, indirect GC roots pin its derivation (from
// before its check, worker/storeTrust.ts), its inputs (the outputs of its input derivations and its
// sources) and then its outputs, and Nix's own collector
// counts them as roots. Between the input step and the build no Nix process of the job holds the
// inputs, so without the roots a collection there could take them.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { realiseDerivation } from '../../worker/nixBuild.js';
import { StoreTrust } from '../../worker/storeTrust.js';
import { nixEnv, requireNix } from '../support/nixStore.js';
import { TEST_NIX_CONFIG } from '../support/workerProcess.js';

requireNix();
const env: NodeJS.ProcessEnv = { ...nixEnv(), NIX_CONFIG: TEST_NIX_CONFIG };
const dir = mkdtempSync(join(tmpdir(), 'kiln-gcroots-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

/** Waits for `condition`, or throws what ended `settling` first (a build that failed before its builder ran). */
async function until(condition: () => boolean, settling: Promise<unknown>): Promise<void> {
  let settled: unknown;
  void settling.then((value) => (settled = value ?? 'settled'), (e: unknown) => (settled = e));
  while (!condition()) {
    if (settled !== undefined) throw new Error(`it ended first: ${JSON.stringify(settled)}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The store paths Nix's collector treats as roots through links in `rootsDir`. */
function rootsIn(rootsDir: string): string[] {
  const listed = execFileSync('nix-store', ['--gc', '--print-roots'], { env, encoding: 'utf8' });
  return listed.split('\n').filter((line) => line.startsWith(`${rootsDir}/`)).map((line) => line.split(' -> ')[1]!).sort();
}

t.test('a running build\'s inputs and then its outputs are GC roots', async (t) => {
  const rootsDir = join(dir, 'roots');
  execFileSync('mkdir', ['-p', rootsDir]);
  const gate = join(dir, 'gate');
  execFileSync('mkfifo', [gate]);
  const started = join(dir, 'started');
  const nonce = randomUUID();
  const drvPath = execFileSync('nix-instantiate', ['--expr', `
    let input = derivation { name = "kiln-gcroot-input"; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" "echo input > $out" ]; nonce = "${nonce}"; };
    in derivation {
      name = "kiln-gcroot-top"; system = "x86_64-linux"; builder = "/bin/sh";
      args = [ "-c" "echo > ${started}; read line < ${gate}; echo $line \${input} > $out" ];
      src = builtins.toFile "kiln-gcroot-src-${nonce}" "source";
    }`], { env, encoding: 'utf8' }).trim();
  const shown = JSON.parse(execFileSync('nix', ['--extra-experimental-features', 'nix-command', 'show-derivation', drvPath], { env, encoding: 'utf8' })) as Record<string, { inputSrcs: string[]; inputDrvs: Record<string, string[]>; outputs: { out: { path: string } } }>;
  const [source] = shown[drvPath]!.inputSrcs;
  const [inputDrv] = Object.keys(shown[drvPath]!.inputDrvs);
  const output = shown[drvPath]!.outputs.out.path;
  // Built beforehand, as the server dispatches a build only once its inputs are there.
  const inputOutput = execFileSync('nix-store', ['--realise', inputDrv!], { env, encoding: 'utf8' }).trim();
  // and noted as built here from nothing, as the worker notes what it builds (worker/storeTrust.ts)
  const trust = new StoreTrust(null, []);
  const narHash = (JSON.parse(execFileSync('nix', ['--extra-experimental-features', 'nix-command', 'path-info', '--json', inputOutput], { env, encoding: 'utf8' })) as { narHash: string }[])[0]!.narHash;
  await trust.recordBuilt([{ path: inputOutput, narHash }], []);
  const building = realiseDerivation({
    drvPath, timeoutSecs: 0, maxSilentSecs: 0, cores: null, substituters: [], netrcFile: null, gcRoot: join(rootsDir, 'job-1'), fetchStoredLog: false, env, onLog: () => undefined, trust,
  });
  await until(() => existsSync(started), building);
  t.same(readdirSync(rootsDir).sort(), ['job-1-drv', 'job-1-inputs', 'job-1-inputs-2'], 'one link for the derivation and one per input, named after the job');
  t.same(rootsIn(rootsDir), [drvPath, inputOutput, source].sort(), 'while the builder runs, Nix counts the derivation and the inputs as roots');
  writeFileSync(gate, 'built\n');
  const realised = await building;
  t.ok(realised.ok, 'the build succeeds');
  t.equal(readlinkSync(join(rootsDir, 'job-1')), output, 'the output gets its root');
  t.same(rootsIn(rootsDir), [drvPath, inputOutput, output, source].sort());
});
