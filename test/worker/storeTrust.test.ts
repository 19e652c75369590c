// The shared store (worker/storeTrust.ts; docs/builds.md, "The shared store"), with real Nix and
// signed file:// caches: two organizations' jobs on one worker store. Organization A's cache serves a
// poisoned input under the very store path B's build needs (signed by A's key); A's build uses it,
// and B's build on the same store must not: it lets go of it and substitutes B's own. A path from a
// cache both jobs carry stays as it is, and so does an output built here from it; a poisoned path
// another build still holds makes B's job give itself back, and it completes once it is free.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SigningKey } from '../../protocol/index.js';
import { realiseDerivation } from '../../worker/nixBuild.js';
import type { RunOptions } from '../../worker/childProcess.js';
import { LEDGER_COMPACT_LINES } from '../../worker/builtPathsLedger.js';
import { letGo, StoreTrust, type TrustScope, type Verdict } from '../../worker/storeTrust.js';
import { eventually, quietFor, within } from '../support/eventually.js';
import { poison as poisonCache, signedCache, type SignedCache } from '../support/poisonedCache.js';
import { nixEnv, requireNix } from '../support/nixStore.js';
import { TEST_NIX_CONFIG } from '../support/workerProcess.js';

requireNix();
const env: NodeJS.ProcessEnv = { ...nixEnv(), NIX_CONFIG: TEST_NIX_CONFIG };
const dir = mkdtempSync(join(tmpdir(), 'kiln-store-trust-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

const run = (command: string, args: string[]) => execFileSync(command, args, { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
const nix = (args: string[]) => run('nix', ['--extra-experimental-features', 'nix-command', ...args]);
const registered = (path: string) => (JSON.parse(nix(['path-info', '--json', path])) as { registrationTime: number }[])[0]!.registrationTime;

type Cache = SignedCache;
const cache = (name: string): Cache => signedCache(dir, name);
const substituter = (c: Cache) => ({ url: c.url, publicKeys: [c.key.publicKey.toString()] });
/** Copies a valid path into the cache, signed with its key. */
const upload = (c: Cache, path: string) => nix(['copy', '--to', `${c.url}?secret-key=${c.keyFile}`, path]);
const forget = (path: string) => run('nix-store', ['--delete', ...run('nix-store', ['--query', '--referrers-closure', path]).split('\n')]);
/** What a hostile tenant can upload: `contents` under the store path `path`, signed by its cache's key. */
const poison = (c: Cache, path: string, contents: string) => poisonCache(c, path, contents, env);

/** p: an input-addressed path; uses(p): outputs that copy p's contents; a fresh salt each time. */
function derivations(salt: string) {
  const file = join(dir, `${salt}.nix`);
  writeFileSync(file, `rec {
    p = derivation { name = "kiln-trust-in"; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" "echo honest-${salt} > $out" ]; };
    a = derivation { name = "kiln-trust-a"; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" "read x < \${p}; echo a-$x > $out" ]; };
    b = derivation { name = "kiln-trust-b"; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" "read x < \${p}; echo b-$x > $out" ]; };
    c = derivation { name = "kiln-trust-c"; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" "read x < \${a}; echo c-$x > $out" ]; };
  }`);
  const drv = (attr: string) => run('nix-instantiate', [file, '-A', attr]);
  const pDrv = drv('p');
  return { p: run('nix-store', ['--query', '--outputs', pDrv]), pDrv, a: drv('a'), b: drv('b'), c: drv('c') };
}

const realise = (drvPath: string, caches: Cache[], trust: StoreTrust, gcRoot: string | null = null) => realiseDerivation({
  drvPath, timeoutSecs: 0, maxSilentSecs: 0, cores: null, netrcFile: null, gcRoot, fetchStoredLog: false, env, onLog: () => undefined,
  substituters: caches.map(substituter), trust,
});
const outputOf = (drvPath: string) => run('nix-store', ['--query', '--outputs', drvPath]);

t.test('a poisoned input from another organization\'s cache is let go of, and the build uses its own cache\'s', async (t) => {
  const trust = await StoreTrust.open(join(dir, 'ledger-1.jsonl'), { env });
  const alpha = cache('alpha');
  const beta = cache('beta');
  const d = derivations(randomUUID());
  run('nix-store', ['--realise', d.pDrv]);
  upload(beta, d.p); // beta's cache: the honest P
  forget(d.p);
  poison(alpha, d.p, 'poisoned\n'); // alpha's cache: the same store path, other contents, alpha's signature

  t.match(await realise(d.a, [alpha], trust), { ok: true, alreadyValid: false }, 'alpha builds with what its own cache serves');
  t.equal(readFileSync(outputOf(d.a), 'utf8'), 'a-poisoned\n', 'alpha\'s output is built from its own cache\'s P');
  t.equal(readFileSync(d.p, 'utf8'), 'poisoned\n', 'and the shared store holds the poisoned P');

  t.match(await realise(d.b, [beta], trust), { ok: true, alreadyValid: false }, 'beta\'s build on the same store');
  t.match(readFileSync(outputOf(d.b), 'utf8'), /^b-honest-/, 'beta\'s output is built from beta\'s P');
  t.match(readFileSync(d.p, 'utf8'), /^honest-/, 'the store now holds beta\'s P');

  const onAlphas = await realise(d.c, [beta], trust);
  t.match(onAlphas, { ok: false, failure: { reason: 'inputs_unavailable' } }, 'beta\'s build on alpha\'s output (built here from the poison) does not take it');
  t.throws(() => nix(['path-info', outputOf(d.a)]), 'alpha\'s output was let go of: the server has it built for beta first');
  t.match(await realise(d.a, [beta], trust), { ok: true, alreadyValid: false });
  t.match(await realise(d.c, [beta], trust), { ok: true, alreadyValid: false });
  t.match(readFileSync(outputOf(d.c), 'utf8'), /^c-a-honest-/, 'then built from beta\'s P');
});

t.test('a path from a cache both jobs carry stays, and so does an output built here from it', async (t) => {
  const trust = await StoreTrust.open(join(dir, 'ledger-2.jsonl'), { env });
  const shared = cache('shared');
  const alpha = cache('alpha2');
  const beta = cache('beta2');
  const d = derivations(randomUUID());
  run('nix-store', ['--realise', d.pDrv]);
  upload(shared, d.p);
  forget(d.p);

  t.match(await realise(d.a, [shared, alpha], trust), { ok: true, alreadyValid: false }, 'alpha substitutes P from the shared cache');
  const substituted = registered(d.p);
  const built = registered(outputOf(d.a));
  t.match(await realise(d.c, [shared, beta], trust), { ok: true, alreadyValid: false }, 'beta builds on alpha\'s output');
  t.equal(registered(d.p), substituted, 'P was kept: not downloaded again');
  t.equal(registered(outputOf(d.a)), built, 'alpha\'s output, built here from the shared cache only, was kept');
  t.match(readFileSync(join(dir, 'ledger-2.jsonl'), 'utf8'), outputOf(d.a), 'the ledger records what it rested on');

  const gamma = cache('gamma2');
  upload(gamma, d.p);
  // Registration times count whole seconds: a rebuild within the second of the first build would look the same.
  await eventually(() => Date.now() / 1000 >= built + 1, { message: 'the second after alpha\'s output was registered' });
  t.match(await realise(d.a, [gamma], trust), { ok: true, alreadyValid: false }, 'a job not trusting the shared cache builds alpha\'s derivation again');
  t.not(registered(outputOf(d.a)), built, 'after letting go of the output built on the shared cache\'s word');
  t.equal(registered(d.p), substituted, 'P stays: gamma\'s cache holds it with the same NAR hash (a narinfo lookup)');
});

t.test('a poisoned input another build still holds: the job gives itself back, and completes once it is free', async (t) => {
  const trust = await StoreTrust.open(null, { env });
  const alpha = cache('alpha3');
  const beta = cache('beta3');
  const d = derivations(randomUUID());
  run('nix-store', ['--realise', d.pDrv]);
  upload(beta, d.p);
  forget(d.p);
  poison(alpha, d.p, 'poisoned\n');
  t.match(await realise(d.a, [alpha], trust), { ok: true });
  const root = join(dir, 'alpha-root');
  run('nix-store', ['--realise', d.p, '--add-root', root, '--indirect']);

  const declined = await realise(d.b, [beta], trust, join(dir, 'roots-beta'));
  t.match(declined, { ok: false, declined: true, failure: { message: /in use by another build/ } }, 'declined, not failed');
  t.equal(readFileSync(d.p, 'utf8'), 'poisoned\n', 'alpha\'s build keeps what it holds');

  rmSync(root);
  t.match(await realise(d.b, [beta], trust, join(dir, 'roots-beta')), { ok: true }, 'tried again once alpha let go');
  t.match(readFileSync(outputOf(d.b), 'utf8'), /^b-honest-/, 'with beta\'s P');
});

t.test('content-addressed inputs serve every job; one whose contents are not what its address says is let go of', async (t) => {
  const trust = new StoreTrust(null, []);
  const salt = randomUUID();
  const tree = join(dir, `tree-${salt}`);
  mkdirSync(tree);
  writeFileSync(join(tree, 'f'), `source ${salt}\n`);
  const fixedText = `fixed ${salt}\n`;
  const file = join(dir, `ca-${salt}.nix`);
  writeFileSync(file, `rec {
    src = builtins.path { path = ${tree}; name = "kiln-trust-src"; };
    fixed = derivation { name = "kiln-trust-fixed"; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" "echo fixed ${salt} > $out" ];
      outputHashMode = "flat"; outputHashAlgo = "sha256"; outputHash = "${createHash('sha256').update(fixedText).digest('hex')}"; };
    top = derivation { name = "kiln-trust-top"; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" "read x < \${src}/f; read y < \${fixed}; echo $x $y > $out" ]; };
    again = derivation { name = "kiln-trust-again"; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" "read y < \${fixed}; echo $y > $out" ]; };
  }`);
  const drv = (attr: string) => run('nix-instantiate', [file, '-A', attr]);
  const fixed = run('nix-store', ['--realise', drv('fixed')]);
  t.match(await realise(drv('top'), [], trust), { ok: true, alreadyValid: false }, 'a source and a fixed output: no cache needed to vouch for them');

  // A flat file's address is the hash of the file, which the check computes (Nix's narHash is of
  // the NAR): changed behind Nix's back, a worker that had not checked it yet lets it go.
  run('chmod', ['u+w', fixed]);
  writeFileSync(fixed, 'tampered\n');
  t.match(await realise(drv('again'), [], new StoreTrust(null, [])), { ok: false, failure: { reason: 'inputs_unavailable' } }, 'contents that do not hash as the address says');
  t.throws(() => nix(['path-info', fixed]), 'were let go of');
});

t.test('the ledger keeps the paths still valid: written anew at start, and once it has grown', async (t) => {
  const file = join(dir, 'ledger-compact.jsonl');
  const d = derivations(randomUUID());
  const valid = run('nix-store', ['--realise', d.pDrv]);
  const gone = run('nix-store', ['--realise', d.a]);
  const narHash = (path: string) => (JSON.parse(nix(['path-info', '--json', path])) as { narHash: string }[])[0]!.narHash;
  const first = await StoreTrust.open(file, { env });
  await first.recordBuilt([{ path: valid, narHash: narHash(valid) }, { path: gone, narHash: narHash(gone) }], []);
  await first.recordBuilt([{ path: valid, narHash: narHash(valid) }], []);
  writeFileSync(file, `${readFileSync(file, 'utf8')}{"cut short`);
  t.equal(readFileSync(file, 'utf8').split('\n').length, 4, 'three lines and a damaged one');
  forget(gone);

  const again = await StoreTrust.open(file, { env });
  await eventually(() => readFileSync(file, 'utf8').split('\n').length, { until: (n) => n === 2, message: 'the ledger is written anew at start' });
  const lines = readFileSync(file, 'utf8').split('\n').filter((l) => l !== '');
  t.equal(lines.length, 1, 'at start: one line a path, the damaged one dropped');
  t.match(lines[0], valid, 'the valid path stays');
  t.notMatch(readFileSync(file, 'utf8'), gone, 'the deleted path\'s line is gone');
  t.same((await again.check([valid], { substituters: [] }, { env })).rejected, [], 'and the valid one still counts as built here');

  // Past LEDGER_COMPACT_LINES appended lines, the next append starts a rewrite (not awaited by it).
  const fake = Array.from({ length: LEDGER_COMPACT_LINES + 1 }, (_, i) => ({ path: `/nix/store/${i.toString().padStart(32, '0')}-kiln-fake`, narHash: 'sha256:0' }));
  await again.recordBuilt(fake, []);
  await eventually(() => readFileSync(file, 'utf8').split('\n').length, { until: (n) => n === 2, message: 'the ledger is written anew' });
  t.same(readFileSync(file, 'utf8').split('\n').filter((l) => l !== '').map((l) => (JSON.parse(l) as { path: string }).path), [valid], 'grown past the mark: the paths not valid are dropped again');
  await again.recordBuilt([{ path: gone, narHash: 'sha256:1' }], []);
  t.equal(readFileSync(file, 'utf8').split('\n').length, 3, 'and appended to after');
});

/**
 * The worker's nix-store, but each `--check-validity` waits until `<hold>/release` exists (having
 * made `<hold>/reached`), and one naming a `kiln-refused` path fails as Nix refuses a path outside its store.
 */
function heldNixStore(name: string, held = true): { env: NodeJS.ProcessEnv; reached: string; release: string } {
  const hold = join(dir, name);
  mkdirSync(hold);
  const real = run('sh', ['-c', 'command -v nix-store']);
  writeFileSync(join(hold, 'nix-store'), `#!/bin/sh
case "$*" in *kiln-refused*) echo "error: path is not in the Nix store" >&2; exit 1;; esac
case "$*" in *--check-validity*) touch ${hold}/reached; while [ ! -e ${hold}/release ]; do sleep 0.05; done;; esac
exec ${real} "$@"
`, { mode: 0o755 });
  if (!held) writeFileSync(join(hold, 'release'), '');
  return { env: { ...env, PATH: `${hold}:${env['PATH'] ?? ''}` }, reached: join(hold, 'reached'), release: join(hold, 'release') };
}
const ledgerLine = (path: string, narHash = 'sha256:0') => `${JSON.stringify({ path, narHash, keys: [] })}\n`;
const fakePath = (name: string) => `/nix/store/${randomUUID().replace(/[^0-9a-d]/g, '').padEnd(32, '0').slice(0, 32)}-${name}`;
const narHashOf = (path: string) => (JSON.parse(nix(['path-info', '--json', path])) as { narHash: string }[])[0]!.narHash;

t.test('appends go on while a rewrite queries validity, and the rewrite keeps them', async (t) => {
  const file = join(dir, 'ledger-held.jsonl');
  const d = derivations(randomUUID());
  const valid = run('nix-store', ['--realise', d.pDrv]);
  const stale = fakePath('kiln-stale');
  writeFileSync(file, `${ledgerLine(valid, narHashOf(valid))}${ledgerLine(stale)}{"cut short`);
  const held = heldNixStore('hold-append');
  t.teardown(() => writeFileSync(held.release, '')); // a failing test leaves no nix-store waiting
  const trust = await StoreTrust.open(file, { env: held.env });
  await eventually(() => existsSync(held.reached), { message: 'the rewrite at start queries validity' });

  const fresh = run('nix-store', ['--realise', d.a]);
  await within(trust.recordBuilt([{ path: fresh, narHash: narHashOf(fresh) }], []), 20_000, () => 'recordBuilt waits for the rewrite\'s validity query');
  const appended = readFileSync(file, 'utf8').split('\n').filter((l) => l !== '').at(-1)!;
  t.equal((JSON.parse(appended) as { path: string }).path, fresh, 'appended on a line of its own, not glued to the line a crash cut short');

  writeFileSync(held.release, '');
  await eventually(() => readFileSync(file, 'utf8'), { until: (text) => !text.includes('kiln-stale'), message: 'the rewrite ends' });
  t.same(readFileSync(file, 'utf8').split('\n').filter((l) => l !== '').map((l) => (JSON.parse(l) as { path: string }).path), [valid, fresh], 'the rewrite kept the line appended meanwhile');
  const again = await StoreTrust.open(file, { env });
  t.same((await again.check([fresh], { substituters: [] }, { env })).rejected, [], 'which still counts as built here after a restart');
});

t.test('a path Nix refuses does not stop the rewrite: it goes, with the paths outside the store', async (t) => {
  const file = join(dir, 'ledger-refused.jsonl');
  const valid = run('nix-store', ['--realise', derivations(randomUUID()).pDrv]);
  const fakes = Array.from({ length: 5 }, () => ledgerLine(fakePath('kiln-fake'))).join('');
  writeFileSync(file, `${fakes}${ledgerLine(fakePath('kiln-refused'))}${ledgerLine(valid, narHashOf(valid))}${ledgerLine('/elsewhere/kiln-outside')}${fakes}`);
  await StoreTrust.open(file, { env: heldNixStore('hold-refused', false).env });
  await eventually(() => readFileSync(file, 'utf8').split('\n').length, { until: (n) => n === 2, message: 'the ledger is written anew' });
  t.match(readFileSync(file, 'utf8'), valid, 'the valid path stays');
});

t.test('a validity query that hangs fails the rewrite by its time-out, and the next waits for the file to grow as much again', async (t) => {
  const file = join(dir, 'ledger-hangs.jsonl');
  writeFileSync(file, Array.from({ length: LEDGER_COMPACT_LINES + 1 }, () => ledgerLine(fakePath('kiln-fake'))).join(''));
  const calls = join(dir, 'hangs-calls');
  const hanging = heldNixStore('hold-hangs');
  t.teardown(() => writeFileSync(hanging.release, ''));
  // each query notes its shell's pid, then waits for a release that comes only at the test's end
  const hangingEnv = { ...hanging.env, KILN_TEST_CALLS: calls };
  writeFileSync(join(dir, 'hold-hangs', 'nix-store'), `#!/bin/sh
case "$*" in *--check-validity*) echo $$ >> "$KILN_TEST_CALLS"; while [ ! -e ${hanging.release} ]; do sleep 0.05; done; exit 1;; esac
exec ${run('sh', ['-c', 'command -v nix-store'])} "$@"
`, { mode: 0o755 });
  const trust = await StoreTrust.open(file, { env: hangingEnv }, 300);
  const pid = Number((await eventually(() => (existsSync(calls) ? readFileSync(calls, 'utf8') : ''), { message: 'the rewrite at start queries validity' })).trim());
  const alive = () => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  await eventually(() => !alive(), { message: 'the hanging query is ended by its time-out' });
  t.ok(readFileSync(file, 'utf8').includes('kiln-fake'), 'the failed rewrite left the file as it was');
  await trust.recordBuilt([{ path: fakePath('kiln-after'), narHash: 'sha256:0' }], []);
  await quietFor(500);
  t.equal(readFileSync(calls, 'utf8').split('\n').filter((l) => l !== '').length, 1, 'an append past the mark starts no new rewrite right after a failed one');
});

/** A trust whose every check first tries to let go of what it checks, as another job would meanwhile: what each attempt answered. */
class LettingGo extends StoreTrust {
  readonly answers: (string | null)[] = [];
  override async check(paths: readonly string[], scope: TrustScope, run: RunOptions): Promise<Verdict> {
    this.answers.push(paths.length === 0 ? null : await letGo(paths, { env }));
    return super.check(paths, scope, run);
  }
}

t.test('a build roots its derivation before checking it: another job cannot let go of it meanwhile', async (t) => {
  const d = derivations(randomUUID());
  const roots = join(dir, 'roots-drv');
  const trust = new LettingGo(null, []);
  t.match(await realise(d.a, [], trust, roots), { ok: false, failure: { reason: 'inputs_unavailable' } }, 'P is not substitutable: the build stops at its inputs');
  t.match(trust.answers, [/still alive/], 'another job letting go of the .drv during the check could not');
  t.equal(readlinkSync(`${roots}-drv`), d.a, 'after rooting the .drv (<gcRoot>-drv)');
  t.match(await letGo([d.a], { env }), /still alive/, 'which another job cannot let go of');
  t.match(await letGo([d.pDrv], { env }), /still alive/, 'nor an input derivation: the root holds its closure');
  rmSync(`${roots}-drv`);
  t.equal(await letGo([d.a], { env }), null, 'once the job lets go of its roots, it can');
});

/** D: two outputs, out and dev; a fresh salt each time. */
function twoOutputs(salt: string) {
  const file = join(dir, `multi-${salt}.nix`);
  writeFileSync(file, `derivation { name = "kiln-trust-multi"; system = "x86_64-linux"; builder = "/bin/sh"; outputs = [ "out" "dev" ];
    args = [ "-c" "echo out-${salt} > $out; echo dev-${salt} > $dev" ]; }`);
  const drvPath = run('nix-instantiate', [file]);
  const [out, dev] = ['out', 'dev'].map((name) => (JSON.parse(nix(['show-derivation', drvPath])) as Record<string, { outputs: Record<string, { path: string }> }>)[drvPath]!.outputs[name]!.path);
  return { drvPath, out: out!, dev: dev! };
}

t.test('one output already valid from another organization\'s cache is checked too, though the others are missing', async (t) => {
  const trust = new LettingGo(null, []);
  const alpha = cache('alpha4');
  const beta = cache('beta4');
  const d = twoOutputs(randomUUID());
  poison(alpha, d.dev, 'poisoned\n');
  nix(['copy', '--no-check-sigs', '--from', alpha.url, d.dev]); // what alpha's job substituting D's dev leaves
  t.match(nix(['path-info', '--sigs', d.dev]), alpha.key.publicKey.toString().split(':')[0]!, 'the store holds alpha\'s dev, alpha\'s signature with it');

  t.match(await realise(d.drvPath, [beta], trust, join(dir, 'roots-multi')), { ok: true, alreadyValid: false }, 'beta builds D (out missing)');
  t.match(readFileSync(d.dev, 'utf8'), /^dev-/, 'with its own dev, alpha\'s let go of');
  t.match(readFileSync(d.out, 'utf8'), /^out-/);

  const roots = join(dir, 'roots-multi-again');
  trust.answers.length = 0;
  t.match(await realise(d.drvPath, [beta], trust, roots), { ok: true, alreadyValid: true }, 'then valid, all of it');
  t.match(trust.answers, [/still alive/, /still alive/], 'another job letting go of the .drv or the outputs during their checks could not');
  t.same([`${roots}-outputs`, `${roots}-outputs-2`].map((r) => readlinkSync(r)).sort(), [d.out, d.dev].sort(), 'and rooted before the check, until the job lets go of its roots');
});

t.test('an output substituted during the build from a cache the job does not trust is not its output', async (t) => {
  const alpha = cache('alpha5');
  const d = twoOutputs(randomUUID());
  poison(alpha, d.dev, 'poisoned\n');
  // The worker's Nix substitutes from alpha (as another job's Nix could, between the check and the
  // build), but the job's trust knows nothing of alpha's key.
  const alphaEnv = { ...env, NIX_CONFIG: `${TEST_NIX_CONFIG}\nsubstituters = ${alpha.url}\ntrusted-public-keys = ${alpha.key.publicKey.toString()}\n` };
  const realised = await realiseDerivation({
    drvPath: d.drvPath, timeoutSecs: 0, maxSilentSecs: 0, cores: null, netrcFile: null, gcRoot: null, fetchStoredLog: false, env: alphaEnv, onLog: () => undefined,
    substituters: [], trust: new StoreTrust(null, []),
  });
  t.match(realised, { ok: false, failure: { reason: 'worker_error', message: /not vouched for/ } }, 'the substituted dev is rejected after the build');

  const roots = join(dir, 'roots-substituted');
  const rooted = await realiseDerivation({
    drvPath: d.drvPath, timeoutSecs: 0, maxSilentSecs: 0, cores: null, netrcFile: null, gcRoot: roots, fetchStoredLog: false, env: alphaEnv, onLog: () => undefined,
    substituters: [], trust: new StoreTrust(null, []),
  });
  t.match(rooted, { ok: false, failure: { reason: 'worker_error', message: /not vouched for/ } }, 'with GC roots too: the job lets go of the roots the build added before letting go of the output, not declined');
});

t.test('a derivation another organization\'s cache put under this job\'s .drv path is let go of', async (t) => {
  const trust = await StoreTrust.open(null, { env });
  const alpha = cache('alpha6');
  const beta = cache('beta6');
  const honest = twoOutputs(randomUUID());
  const fake = twoOutputs(randomUUID()); // a derivation Nix accepts (its outputs are its own), of other contents
  nix(['copy', '--derivation', '--to', `${beta.url}?secret-key=${beta.keyFile}`, honest.drvPath]);
  forget(honest.drvPath);
  poison(alpha, honest.drvPath, readFileSync(fake.drvPath, 'utf8'));
  nix(['copy', '--derivation', '--no-check-sigs', '--from', alpha.url, honest.drvPath]); // what alpha's job fetching it leaves
  t.equal(readFileSync(honest.drvPath, 'utf8'), readFileSync(fake.drvPath, 'utf8'), 'the store holds alpha\'s derivation under the path');

  t.match(await realise(honest.drvPath, [beta], trust), { ok: true, outputs: { out: honest.out, dev: honest.dev } }, 'beta\'s job builds the derivation from its own cache');
  t.not(readFileSync(honest.drvPath, 'utf8'), readFileSync(fake.drvPath, 'utf8'), 'alpha\'s was let go of');
});

t.test('a source that is itself a .drv (its outputs not built) is checked as the file it is', async (t) => {
  const salt = randomUUID();
  const file = join(dir, `drv-src-${salt}.nix`);
  writeFileSync(file, `rec {
    p = derivation { name = "kiln-trust-unbuilt"; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" "echo ${salt} > $out" ]; };
    top = derivation { name = "kiln-trust-drv-src"; system = "x86_64-linux"; builder = "/bin/sh";
      args = [ "-c" "read x < \${builtins.unsafeDiscardOutputDependency p.drvPath}; echo ok > $out" ]; };
  }`);
  const top = run('nix-instantiate', [file, '-A', 'top']);
  const realised = await realise(top, [], new StoreTrust(null, []));
  t.match(realised, { ok: true, alreadyValid: false }, 'built: the .drv is text-addressed', { realised });
});

t.test('the worker\'s own signing key vouches for nothing: Nix signs whatever it builds with it', async (t) => {
  const key = SigningKey.generate(`worker-${randomUUID().slice(0, 8)}`);
  const keyFile = join(dir, 'worker.sec');
  writeFileSync(keyFile, key.toString(), { mode: 0o600 });
  const signing: NodeJS.ProcessEnv = { ...env, NIX_CONFIG: `${TEST_NIX_CONFIG}\nsecret-key-files = ${keyFile}\ntrusted-public-keys = ${key.publicKey.toString()}\n` };
  const d = derivations(randomUUID());
  const built = execFileSync('nix-store', ['--realise', d.pDrv], { env: signing, encoding: 'utf8' }).trim();
  t.match(nix(['path-info', '--sigs', built]), `${key.publicKey.toString().split(':')[0]!}:`, 'the store holds the worker\'s signature of what it built');
  const trust = await StoreTrust.open(null, { env: signing });
  t.same((await trust.check([built], { substituters: [] }, { env: signing })).rejected, [built], 'which the ledger does not know: not acceptable');

  writeFileSync(keyFile, 'unreadable');
  const unknown = await StoreTrust.open(null, { env: signing });
  t.same((await unknown.check([built], { substituters: [] }, { env: signing })).rejected, [built], 'nor when the key file cannot be read');
});
