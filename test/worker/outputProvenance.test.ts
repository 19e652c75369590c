// The shared store (worker/outputProvenance.ts; docs/builds.md, "Whose completion"), with real Nix:
// a build whose outputs are already valid in the worker's store reports them as already built only
// when it can vouch for them: built in this store, or held by one of the job's own substituters with
// the same NAR hash. An output substituted from a cache the job's project does not read (another
// organization's) is let go of and built again here.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { realiseDerivation } from '../../worker/nixBuild.js';
import { nixEnv, requireNix } from '../support/nixStore.js';
import { TEST_NIX_CONFIG } from '../support/workerProcess.js';

requireNix();
const env: NodeJS.ProcessEnv = { ...nixEnv(), NIX_CONFIG: TEST_NIX_CONFIG };
const dir = mkdtempSync(join(tmpdir(), 'kiln-output-provenance-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

const run = (command: string, args: string[]) => execFileSync(command, args, { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
const nix = (args: string[]) => run('nix', ['--extra-experimental-features', 'nix-command', ...args]);
const ultimate = (path: string) => (JSON.parse(nix(['path-info', '--json', path])) as { ultimate?: boolean }[])[0]!.ultimate === true;

/** A fresh derivation, built once and copied into `cache`, then substituted back from it: valid here, not built here. */
function substitutedFrom(cache: string) {
  const drvPath = run('nix-instantiate', ['--expr',
    `derivation { name = "kiln-provenance"; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" "echo ${randomUUID()} > $out" ]; }`]);
  const out = run('nix-store', ['--realise', drvPath]);
  nix(['copy', '--to', `file://${cache}`, out]);
  run('nix-store', ['--delete', out]);
  run('nix-store', ['--realise', out, '--option', 'substituters', `file://${cache}`, '--option', 'require-sigs', 'false']);
  return { drvPath, out };
}

const realise = (drvPath: string, caches: string[]) => realiseDerivation({
  drvPath, timeoutSecs: 0, maxSilentSecs: 0, cores: null, netrcFile: null, gcRoot: null, fetchStoredLog: false, env, onLog: () => undefined,
  substituters: caches.map((c) => ({ url: `file://${c}`, publicKeys: [] })),
});

t.test('an output substituted from a cache the job does not read is built again; one its cache holds is taken', async (t) => {
  const theirs = join(dir, 'theirs');
  const mine = join(dir, 'mine');
  const { drvPath, out } = substitutedFrom(theirs);
  t.notOk(ultimate(out), 'valid, substituted from another organization\'s cache');

  const realised = await realise(drvPath, [mine]);
  t.match(realised, { ok: true, alreadyValid: false }, 'not vouched for: built here');
  t.ok(ultimate(out), 'now built in this store');
  t.match(await realise(drvPath, []), { ok: true, alreadyValid: true }, 'built here: already valid for any job');

  const other = substitutedFrom(theirs);
  t.match(await realise(other.drvPath, [mine, theirs]), { ok: true, alreadyValid: true }, 'the job\'s own substituter holds it, same hash: taken as it is');
  t.notOk(ultimate(other.out), 'and left as it was');
});
