// A push job on the shared store (worker/pushJob.ts; docs/builds.md, "The shared store"), with an
// in-process worker and real Nix: the target cache signs what it receives with its own key, so a
// path another organization's job left in the store under the same name, or a derivation whose
// contents are not what its path says, must not reach it. Nothing of such a job is pushed, the
// path is let go of and the job fails `inputs_unavailable` naming it.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { eventually } from '../support/eventually.js';
import { startInProcessWorker } from '../support/inProcessWorker.js';
import { nixEnv, requireNix, tempDir } from '../support/nixStore.js';
import { poison, signedCache } from '../support/poisonedCache.js';
import { TEST_NIX_CONFIG } from '../support/workerProcess.js';

requireNix();
const env: NodeJS.ProcessEnv = { ...nixEnv(), NIX_CONFIG: TEST_NIX_CONFIG };
const dir = tempDir('kiln-push-trust-');
const run = (command: string, args: string[]) => execFileSync(command, args, { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
const nix = (args: string[]) => run('nix', ['--extra-experimental-features', 'nix-command', ...args]);
const valid = (path: string) => {
  try {
    run('nix-store', ['--check-validity', path]);
    return true;
  } catch {
    return false;
  }
};

/** p: an input-addressed output; a: a derivation using it; other: a derivation of other contents; a fresh salt each time. */
function expressions(salt: string) {
  const file = join(dir, `${salt}.nix`);
  writeFileSync(file, `rec {
    p = derivation { name = "kiln-push-in"; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" "echo honest-${salt} > $out" ]; };
    a = derivation { name = "kiln-push-a"; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" "read x < \${p}; echo $x > $out" ]; };
    other = derivation { name = "kiln-push-in"; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" "echo other-${salt} > $out" ]; };
  }`);
  /** the attribute's .drv, written to the store; `readonly`: its path only */
  return (attr: string, readonly = false) => run('nix-instantiate', [...(readonly ? ['--readonly-mode'] : []), file, '-A', attr]);
}

t.test('what another organization left in the shared store is not pushed into this one\'s cache', async (t) => {
  const { session } = await startInProcessWorker(t, dir);
  const alpha = signedCache(dir, 'alpha');
  /** p's .drv path holding `other`'s derivation (Nix takes it: its outputs are its own), as alpha's job fetching it from alpha's cache leaves it */
  const fakeDerivation = (e: ReturnType<typeof expressions>) => {
    const fake = e('p', true);
    poison(alpha, fake, readFileSync(e('other'), 'utf8'), env);
    nix(['copy', '--derivation', '--no-check-sigs', '--from', alpha.url, fake]);
    return fake;
  };

  const d = expressions(randomUUID());
  const p = run('nix-store', ['--query', '--outputs', d('p')]);
  poison(alpha, p, 'poisoned\n', env);
  nix(['copy', '--no-check-sigs', '--from', alpha.url, p]); // what alpha's build substituting P leaves
  session.send({ t: 'pushJob', jobId: 'poisoned', paths: [p], targetCaches: ['beta'] });
  t.match(await session.outcome('poisoned'), { t: 'jobFailed', failure: { reason: 'inputs_unavailable', message: new RegExp(`nothing pushed: the store holds ${p}.*let go of`) } });
  t.notOk(session.nars.has(p), 'the poisoned input-addressed path was not pushed');
  t.notOk(valid(p), 'and was let go of');

  // A derivation under another derivation's path: the check hashes the file against the text
  // address its path claims.
  const e = expressions(randomUUID());
  const fake = fakeDerivation(e);
  t.equal(readFileSync(fake, 'utf8'), readFileSync(e('other'), 'utf8'), 'the store holds alpha\'s derivation under the path');
  session.send({ t: 'pushJob', jobId: 'fake-drv', paths: [fake], targetCaches: ['beta'] });
  t.match(await session.outcome('fake-drv'), { t: 'jobFailed', failure: { reason: 'inputs_unavailable', message: new RegExp(fake) } });
  t.notOk(session.nars.has(fake), 'the fake derivation was not pushed');
  t.notOk(valid(fake), 'and was let go of');

  // Its closure as pushed: an honest derivation whose input derivation is fake is not pushed either.
  const f = expressions(randomUUID());
  const fakeInput = fakeDerivation(f);
  const top = f('a'); // written honestly, on top of the fake input already there
  t.match(nix(['path-info', '--json', '--derivation', top]), fakeInput, 'a refers to the fake input');
  session.send({ t: 'pushJob', jobId: 'fake-input', paths: [top], targetCaches: ['beta'] });
  t.match(await session.outcome('fake-input'), { t: 'jobFailed', failure: { reason: 'inputs_unavailable', message: new RegExp(`holds ${fakeInput}`) } });
  t.notOk(session.nars.has(top), 'the honest derivation on top of it was not pushed');

  // What push jobs are for passes: a .drv (text-addressed) and a source (content-addressed).
  const g = expressions(randomUUID());
  const honest = g('a');
  const source = run('nix-store', ['--add', writeSource()]);
  session.send({ t: 'pushJob', jobId: 'honest', paths: [honest, source], targetCaches: ['beta'] });
  t.match(await session.outcome('honest'), { t: 'pushResult', paths: [{ status: 'stored' }, { status: 'stored' }] });
  t.ok(session.nars.has(honest) && session.nars.has(source), 'both pushed');
  // removed after the result is sent, as a build's are
  await eventually(() => readdirSync(join(dir, 'gcroots')).filter((name) => name.startsWith('job-')), { until: (roots) => roots.length === 0, message: 'the job\'s roots go with it' });
});

t.test('a push job\'s paths are rooted while they are checked', async (t) => {
  // The worker's nix, but each closure query of the check (path-info --sigs) first notes the roots there are.
  const shim = join(dir, 'nix-shim');
  mkdirSync(shim);
  const record = join(dir, 'roots-during-checks');
  const gcroots = join(dir, 'gcroots-rooted');
  mkdirSync(gcroots);
  writeFileSync(join(shim, 'nix'), `#!/bin/sh
case "$*" in *path-info*--sigs*) ls ${gcroots} >> ${record}; echo --- >> ${record};; esac
exec ${run('sh', ['-c', 'command -v nix'])} "$@"
`, { mode: 0o755 });
  const { session } = await startInProcessWorker(t, join(dir, 'rooted'), { 'worker.gcrootsDir': gcroots }, { env: { PATH: `${shim}:${process.env['PATH'] ?? ''}` } });
  const g = expressions(randomUUID());
  const source = run('nix-store', ['--add', writeSource()]);
  session.send({ t: 'pushJob', jobId: 'rooted', paths: [g('a'), source], targetCaches: ['beta'] });
  t.match(await session.outcome('rooted'), { t: 'pushResult', paths: [{ status: 'stored' }, { status: 'stored' }] });
  const during = readFileSync(record, 'utf8');
  t.match(during, /^job-rooted-[0-9a-f]+-drv$/m, 'the .drv was rooted during the check');
  t.match(during, /^job-rooted-[0-9a-f]+-paths$/m, 'and the source');
});

function writeSource(): string {
  const file = join(dir, `source-${randomUUID()}`);
  writeFileSync(file, `a source ${file}\n`);
  return file;
}
