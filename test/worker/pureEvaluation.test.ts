// A tenant's flake, evaluated by the worker with real git and Nix, reads its own sources and its
// locked remote inputs, never the worker's files or environment: readFile of a secret, getEnv of
// a variable the worker has, a `path:` input to a secret directory (locked or not) all fail, and
// the secret text appears nowhere in what the worker reports. A flake without inputs and one with
// an input in /nix/store evaluate as before, and so does a batch longer than one argv string.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAttributeWildcard } from '../../protocol/index.js';
import { evaluateFlake } from '../../worker/flakeEval.js';
import { checkoutCommit } from '../../worker/gitCheckout.js';
import { createFlakeRepo } from '../support/flakeRepo.js';
import { nixEnv, requireNix, tempDir } from '../support/nixStore.js';
import { TEST_NIX_CONFIG } from '../support/workerProcess.js';

requireNix();
const dir = tempDir('kiln-worker-pure-');
const baseDir = join(dir, 'worker');
const nonce = randomUUID();
// Letters only: the secret is spliced into derivation names when an evaluation is impure.
const SECRET = `kilnsecret${randomBytes(12).toString('hex')}`;
const env: NodeJS.ProcessEnv = { ...nixEnv(), NIX_CONFIG: TEST_NIX_CONFIG, KILN_PURE_TEST_SECRET: SECRET };

// A directory of the worker's own that no evaluation may read; its file name is unique, so a copy
// in the store is found by name.
const secretDir = join(dir, 'secrets');
const secretFile = `key-${nonce}`;
mkdirSync(secretDir, { recursive: true });
writeFileSync(join(secretDir, secretFile), SECRET);

const nix = (args: string[]) => execFileSync('nix', ['--extra-experimental-features', 'nix-command flakes', ...args], { env, encoding: 'utf8' }).trim();

const derivation = (name: string) => `derivation { name = ${name}; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" "echo > $out" ]; nonce = "${nonce}"; }`;

/** A flake.lock whose only input `name` is the path `path` (what `nix flake lock` writes, without fetching it). */
function pathLock(name: string, path: string): string {
  const source = { type: 'path', path };
  return JSON.stringify({
    nodes: { [name]: { flake: false, locked: { ...source, lastModified: 0, narHash: nix(['hash', 'path', path]) }, original: source }, root: { inputs: { [name]: name } } },
    root: 'root',
    version: 7,
  });
}

async function evaluate(name: string, files: Record<string, string>, wildcard = 'packages.x86_64-linux.*') {
  const repo = createFlakeRepo(join(dir, name), files);
  const checkout = await checkoutCommit(baseDir, randomUUID(), repo.url, repo.commit, env);
  if (!checkout.ok) throw new Error(checkout.failure.message);
  const parsed = parseAttributeWildcard(wildcard);
  if (!parsed.ok) throw new Error(parsed.reason);
  return evaluateFlake({ flakeRef: checkout.flakeRef, wildcard: parsed.value, env });
}

/** Whether Nix ever copied the secret directory into the store (path inputs land in `*-source`). */
const secretInStore = () => readdirSync('/nix/store').some((entry) => entry.endsWith('-source') && existsSync(join('/nix/store', entry, secretFile)));

t.test('a flake without inputs evaluates as before', async (t) => {
  const result = await evaluate('plain', { 'flake.nix': `{ outputs = { self }: { packages.x86_64-linux.one = ${derivation('"kiln-pure-one"')}; }; }` });
  t.ok(result.ok, result.ok ? '' : result.failure.message);
  t.same(result.ok && result.value.errors, [], 'no attribute error');
  t.match(result.ok && result.value.attributes, [{ path: ['packages', 'x86_64-linux', 'one'], drvPath: /-kiln-pure-one\.drv$/ }]);
});

t.test('a file outside the store and the worker\'s environment are out of reach', async (t) => {
  const flake = `{ outputs = { self }: { packages.x86_64-linux = {
    file = ${derivation(`("file-" + builtins.readFile ${join(secretDir, secretFile)})`)};
    env = ${derivation('("env-" + builtins.getEnv "KILN_PURE_TEST_SECRET")')};
  }; }; }`;
  const result = await evaluate('reader', { 'flake.nix': flake });
  t.notMatch(JSON.stringify(result), SECRET, 'the secret appears nowhere in the result');
  if (!result.ok) return t.fail(result.failure.message);
  t.match(result.value.errors, [{ path: ['packages', 'x86_64-linux', 'file'], message: /access to absolute path .* is forbidden in pure eval mode/ }], 'reading the file fails');
  t.match(result.value.attributes, [{ path: ['packages', 'x86_64-linux', 'env'], drvPath: /-env-\.drv$/ }], 'getEnv reads ""');
});

t.test('a path: input to a directory of the worker is refused, locked or not, before Nix fetches it', async (t) => {
  const input = `inputs.loot = { url = "path:${secretDir}"; flake = false; };`;
  const outputs = `outputs = { self, loot }: { packages.x86_64-linux.leak = ${derivation('("loot-" + builtins.readFile "${loot}/' + secretFile + '")')}; };`;
  const flake = `{ ${input} ${outputs} }`;

  const locked = await evaluate('locked-loot', { 'flake.nix': flake, 'flake.lock': pathLock('loot', secretDir) });
  t.match(locked, { ok: false, failure: { class: 'FailedPermanent', reason: 'eval_error', message: /flake input 'loot' is refused: it is the local path .*, outside \/nix\/store/ } });
  t.notMatch(JSON.stringify(locked), SECRET);

  const unlocked = await evaluate('unlocked-loot', { 'flake.nix': flake });
  t.match(unlocked, { ok: false, failure: { class: 'FailedPermanent', reason: 'eval_error', message: /flake input 'loot' is not in flake\.lock/ } }, 'an input missing from flake.lock');
  t.notMatch(JSON.stringify(unlocked), SECRET);
  t.notOk(secretInStore(), 'the secret directory was never copied into the store');
});

t.test('an input locked in flake.nix but absent from flake.lock is refused', async (t) => {
  const storePath = execFileSync('nix-store', ['--add', join(dir, 'secrets')], { env, encoding: 'utf8' }).trim();
  const narHash = encodeURIComponent(nix(['hash', 'path', storePath]));
  const flake = `{ inputs.dep = { url = "path:${storePath}?narHash=${narHash}"; flake = false; }; outputs = { self, dep }: { packages.x86_64-linux = { }; }; }`;
  const result = await evaluate('stale-lock', { 'flake.nix': flake, 'flake.lock': JSON.stringify({ nodes: { root: {} }, root: 'root', version: 7 }) });
  t.match(result, { ok: false, failure: { class: 'FailedPermanent', reason: 'eval_error', message: /flake\.lock is incomplete or out of date/ } });
});

t.test('a path: input inside /nix/store evaluates as before', async (t) => {
  // Named `source`: Nix 2.8's path fetcher takes lastModified from the files' mtimes (1 in the
  // store) when it copies the input into /nix/store/<hash>-source, and 0 when that path is already
  // valid. Adding the input under that name first makes the lock's lastModified 0 right on a fresh
  // store as on a used one.
  const depDir = join(dir, 'source');
  mkdirSync(depDir);
  writeFileSync(join(depDir, 'word'), 'fromstore');
  const storePath = execFileSync('nix-store', ['--add', depDir], { env, encoding: 'utf8' }).trim();
  const flake = `{ inputs.dep = { url = "path:${storePath}"; flake = false; };
    outputs = { self, dep }: { packages.x86_64-linux.dep = ${derivation('("dep-" + builtins.readFile "${dep}/word")')}; }; }`;
  const result = await evaluate('store-input', { 'flake.nix': flake, 'flake.lock': pathLock('dep', storePath) });
  t.ok(result.ok, result.ok ? '' : result.failure.message);
  t.same(result.ok && result.value.errors, [], 'no attribute error');
  t.match(result.ok && result.value.attributes, [{ drvPath: /-dep-fromstore\.drv$/ }], 'the input was read');
});

t.test('attribute paths longer than one argv string are split into several evaluations', async (t) => {
  // 150 names of 1000 characters: one batch by count, over 128 KiB (MAX_ARG_STRLEN) as an expression.
  const count = 150;
  const longName = `builtins.concatStringsSep "" (builtins.genList (_: "x") ${1000})`;
  const hugeName = `builtins.concatStringsSep "" (builtins.genList (_: "y") ${130 * 1024})`;
  const flake = `{ outputs = { self }: { packages.x86_64-linux = builtins.listToAttrs (builtins.genList (i: {
      name = "a\${toString i}-" + ${longName}; value = ${derivation('"kiln-long-${toString i}"')}; }) ${count}) // { \${${hugeName}} = ${derivation('"kiln-huge"')}; };
  }; }`;
  const result = await evaluate('long-names', { 'flake.nix': flake });
  if (!result.ok) return t.fail(result.failure.message);
  t.equal(result.value.attributes.length, count, 'every attribute evaluated');
  t.equal(new Set(result.value.attributes.map((a) => a.drvPath)).size, count);
  t.match(result.value.errors, [{ path: ['packages', 'x86_64-linux', /^y+$/], message: /over kiln's limit/ }], 'one name alone too long for argv is an attribute error');
});
