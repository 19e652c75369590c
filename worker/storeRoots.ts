// The GC roots a job holds for its lifetime (`<worker.gcrootsDir>/job-<id>…`), so that what it
// checked (worker/storeTrust.ts) is what it uses: another job letting go of paths, or a collection,
// cannot delete them in between, and so nothing else can be substituted under their names. Nix roots
// a path it realises (`nix-store --realise --add-root`), but realising a .drv builds its outputs; a
// derivation is rooted as nix-instantiate roots the derivations it writes, by instantiating
// "derivations" whose drvPath is that .drv (builtins.storePath): nothing is built or written. A
// root keeps its path's closure alive too.
import { createHash } from 'node:crypto';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { runCommand, type RunOptions } from './childProcess.js';
import { nixErrorText, nixStore, PATHS_PER_CALL } from './nixCli.js';
import { storeConnections } from './storeConnections.js';


/**
 * A job's GC root name: the job id made a file name (its first 40 characters, others than
 * [A-Za-z0-9._] as `_`), to read, and a digest of the whole id, so that two ids never share one.
 */
export const jobRoot = (dir: string, jobId: string): string =>
  join(dir, `job-${jobId.slice(0, 40).replace(/[^A-Za-z0-9._]/g, '_')}-${createHash('sha256').update(jobId).digest('hex').slice(0, 16)}`);

/** The scratch directories rootPaths writes its list in (`<scratchDir>/roots-…`): one a crash left is swept (worker/partialDownloads.ts). */
const ROOTS_SCRATCH_PREFIX = 'roots-';

/** Each instantiated "derivation" roots its drvPath under `--add-root` (then -2, -3, …); the list is read from a file, so its length is not bounded by the command line. */
const ROOT_DERIVATIONS = '{ list }: map (p: { type = "derivation"; name = "kiln-root"; outputName = "out"; drvPath = builtins.storePath p; }) (builtins.fromJSON (builtins.readFile list))';

/**
 * Roots these valid paths at `<root>-drv…` (the .drv files) and `<root>-paths…` (the others); the
 * error text when Nix cannot (a path no longer valid), null once they are rooted.
 */
export async function rootPaths(paths: readonly string[], root: string, run: RunOptions, scratchDir = tmpdir()): Promise<string | null> {
  const drvs = paths.filter((p) => p.endsWith('.drv'));
  const others = paths.filter((p) => !p.endsWith('.drv'));
  if (drvs.length > 0) {
    // not beside the roots: removeRoots would not know it, and the list must not read as a root
    const scratch = await mkdtemp(join(scratchDir, ROOTS_SCRATCH_PREFIX));
    const list = join(scratch, 'drvs.json');
    try {
      await writeFile(list, JSON.stringify(drvs), { mode: 0o600 });
      const rooted = await storeConnections.hold(() => runCommand('nix-instantiate', [
        '--option', 'pure-eval', 'false', '--option', 'restrict-eval', 'false', '--add-root', `${root}-drv`, '--argstr', 'list', list, '--expr', ROOT_DERIVATIONS,
      ], { ...run, collectStdout: false }));
      if (rooted.exitCode !== 0) return `rooting ${drvs.length} derivation(s): ${nixErrorText(rooted.stderr)}`;
    } finally {
      await rm(scratch, { recursive: true, force: true });
    }
  }
  for (let i = 0; i < others.length; i += PATHS_PER_CALL) {
    const batch = others.slice(i, i + PATHS_PER_CALL);
    // --max-jobs 0: a valid path is only rooted; one gone meanwhile is not built
    const rooted = await nixStore(['--realise', '--max-jobs', '0', '--add-root', `${root}-paths${i === 0 ? '' : `-b${i / PATHS_PER_CALL}`}`, ...batch], { ...run, collectStdout: false });
    if (rooted.exitCode !== 0) return `rooting ${batch.length} path(s): ${nixErrorText(rooted.stderr)}`;
  }
  return null;
}

/** Removes the root `root` and every `<root>-…` beside it; with `kinds`, only `<root>-<kind>` and `<root>-<kind>-…`. */
export async function removeRoots(root: string, kinds?: readonly string[]): Promise<void> {
  const name = basename(root);
  const prefixes = kinds === undefined ? [name] : kinds.map((kind) => `${name}-${kind}`);
  const entries = await readdir(dirname(root)).catch(() => [] as string[]);
  const matches = (entry: string) => prefixes.some((p) => entry === p || entry.startsWith(`${p}-`));
  await Promise.all(entries.filter(matches).map((entry) => rm(join(dirname(root), entry), { force: true })));
}
