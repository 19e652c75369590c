// A job's GC roots (worker/storeRoots.ts), with real Nix: named apart for every job id, and
// nothing but roots in the roots directory (its scratch list goes in the worker's tmp/, where
// one a crash left is swept).
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { jobRoot, removeRoots, rootPaths } from '../../worker/storeRoots.js';
import { nixEnv, requireNix, tempDir } from '../support/nixStore.js';
import { TEST_NIX_CONFIG } from '../support/workerProcess.js';

requireNix();
const env: NodeJS.ProcessEnv = { ...nixEnv(), NIX_CONFIG: TEST_NIX_CONFIG };
const dir = tempDir('kiln-store-roots-');

t.test('job ids that a file name would make alike get roots of their own', async (t) => {
  const names = ['a:b', 'a_b', 'a/b', 'a b'].map((id) => basename(jobRoot(dir, id)));
  t.equal(new Set(names).size, 4, 'four ids, four roots');
  for (const name of names) t.match(name, /^job-a_b-[0-9a-f]{16}$/, 'each still readable');
  t.ok(basename(jobRoot(dir, 'x'.repeat(1000))).length < 80, 'a long id makes a short name');
});

t.test('rooting a job\'s paths leaves only its roots in the roots directory', async (t) => {
  const roots = join(dir, 'roots');
  const scratch = join(dir, 'tmp');
  mkdirSync(roots);
  mkdirSync(scratch);
  const file = join(dir, 'd.nix');
  writeFileSync(file, `derivation { name = "kiln-roots"; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" "echo ${randomUUID()} > $out" ]; }`);
  const drv = execFileSync('nix-instantiate', [file], { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
  const root = jobRoot(roots, 'job:1');
  t.equal(await rootPaths([drv], root, { env }, scratch), null);
  t.same(readdirSync(roots), [`${basename(root)}-drv`], 'the .drv\'s root, and no list beside it');
  t.same(readdirSync(scratch), [], 'the scratch list is gone');
  await removeRoots(root);
  t.same(readdirSync(roots), [], 'and removeRoots takes the root');
});
