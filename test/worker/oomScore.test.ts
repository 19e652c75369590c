// worker.build.oomScoreAdjust with real Nix: a build's builder runs with the score kiln gives the
// build step (it reads its own /proc/self/oom_score_adj into its output), and any command kiln runs
// with a score (as `nix eval` gets 600) starts with it, whatever it forks.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { runCommand } from '../../worker/childProcess.js';
import { realiseDerivation } from '../../worker/nixBuild.js';
import { EVALUATION_OOM_SCORE } from '../../worker/oomScore.js';
import { nixEnv, requireNix } from '../support/nixStore.js';
import { TEST_NIX_CONFIG } from '../support/workerProcess.js';

requireNix();
const env: NodeJS.ProcessEnv = { ...nixEnv(), NIX_CONFIG: TEST_NIX_CONFIG };
const own = readFileSync('/proc/self/oom_score_adj', 'utf8').trim();

/** A derivation whose output is the score its builder ran with (sh builtins only: builders get an empty PATH). */
const scoreDerivation = (): string => execFileSync('nix-instantiate', ['--expr',
  `derivation { name = "kiln-oom-score"; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" "read s < /proc/self/oom_score_adj; echo $s > $out" ]; nonce = "${randomUUID()}"; }`,
], { env, encoding: 'utf8' }).trim();

async function builtScore(oomScore?: number): Promise<string> {
  const realised = await realiseDerivation({
    drvPath: scoreDerivation(), timeoutSecs: 0, maxSilentSecs: 0, cores: null, substituters: [], netrcFile: null, gcRoot: null, fetchStoredLog: false,
    env, onLog: () => undefined, ...(oomScore === undefined ? {} : { oomScore }),
  });
  if (!realised.ok) throw new Error(realised.failure.message);
  return readFileSync(realised.outputs['out']!, 'utf8').trim();
}

t.test('a build runs with the score of its build step', async (t) => {
  t.equal(await builtScore(500), '500', 'the builder inherited 500');
  t.equal(await builtScore(), own, 'without a score the builder has the worker\'s own');
});

t.test('a command started with a score has it from its first instruction', async (t) => {
  const run = await runCommand('/bin/sh', ['-c', 'cat /proc/self/oom_score_adj; sh -c "cat /proc/self/oom_score_adj"'], { env, oomScore: EVALUATION_OOM_SCORE });
  t.equal(run.exitCode, 0, run.stderr);
  t.same(run.stdout.trim().split('\n'), ['600', '600'], 'the command and what it forks');
});
