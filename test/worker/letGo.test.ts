// letGo (worker/storeTrust.ts; docs/builds.md, "The shared store") with real Nix, for more rejected
// paths than one Nix call takes (PATHS_PER_CALL): a job may reject tens of thousands, past the
// kernel's argument limit. A chain of derivations, each .drv referring to the one before, makes the
// referrers closure of the first one every path, so deletions in batches must go referrers first.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PATHS_PER_CALL } from '../../worker/nixCli.js';
import { letGo } from '../../worker/storeTrust.js';
import { nixEnv, requireNix } from '../support/nixStore.js';
import { TEST_NIX_CONFIG } from '../support/workerProcess.js';

requireNix();
const env: NodeJS.ProcessEnv = { ...nixEnv(), NIX_CONFIG: TEST_NIX_CONFIG };
const dir = mkdtempSync(join(tmpdir(), 'kiln-let-go-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const run = (command: string, args: string[]) => execFileSync(command, args, { env, encoding: 'utf8', maxBuffer: 1 << 26, stdio: ['ignore', 'pipe', 'pipe'] }).trim();

t.test('more rejected paths than one Nix call takes are let go of in batches, referrers first', async (t) => {
  const count = 2 * PATHS_PER_CALL + 100;
  const salt = randomUUID();
  const file = join(dir, 'chain.nix');
  // d0 ← d1 ← …: each builder's arguments name the output of the one before, so its .drv refers to
  // that .drv (a .drvPath there would make every earlier .drv an input of each)
  writeFileSync(file, `let
    chain = builtins.genList (i: derivation { name = "kiln-let-go-\${toString i}"; system = "x86_64-linux"; builder = "/bin/sh";
      args = [ "-c" "echo ${salt} \${if i == 0 then "" else "\${builtins.elemAt chain (i - 1)}"} > $out" ]; }) ${count};
  in map (d: d.drvPath) chain`);
  const drvs = JSON.parse(run('nix-instantiate', ['--eval', '--strict', '--json', '--read-write-mode', file])) as string[];
  t.equal(drvs.length, count);
  t.equal(run('nix-store', ['--query', '--referrers-closure', drvs[0]!]).split('\n').length, count, 'the first one\'s referrers are all of them');

  // nix-store, counting the paths each call is given
  const shim = join(dir, 'shim');
  mkdirSync(shim);
  const calls = join(dir, 'calls');
  writeFileSync(join(shim, 'nix-store'), `#!/bin/sh\nn=0; for a; do case $a in /nix/store/*) n=$((n + 1));; esac; done\necho "$1 $n" >> ${calls}\nexec ${run('sh', ['-c', 'command -v nix-store'])} "$@"\n`);
  chmodSync(join(shim, 'nix-store'), 0o755);
  const shimmed = { env: { ...env, PATH: `${shim}:${env['PATH'] ?? ''}` } };

  t.equal(await letGo(drvs, shimmed), null, 'all let go of');
  t.equal(run('nix-store', ['--check-validity', '--print-invalid', ...drvs]).split('\n').length, count, 'none is valid any more');
  const counted = readFileSync(calls, 'utf8').trim().split('\n').map((line) => line.split(' '));
  t.ok(counted.every(([, n]) => Number(n) <= PATHS_PER_CALL), `at most ${PATHS_PER_CALL} paths a call`);
  t.same(counted.filter(([op]) => op === '--delete').map(([, n]) => Number(n)), [PATHS_PER_CALL, PATHS_PER_CALL, 100], 'each path deleted once, in three calls');
});
