// The worker's copies of tenants' repositories: one clone per project (never one per URL, which
// any tenant could name), owner-only on disk, and a warning at start when Nix builds without a
// sandbox, where a build could read them anyway.
import t from 'tap';
import { randomBytes, randomUUID } from 'node:crypto';
import { chmodSync, lstatSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { checkoutCommit, cloneDirectory } from '../../worker/gitCheckout.js';
import { nixSandboxMode, sandboxWarning } from '../../worker/nixSandbox.js';
import { secureWorkerBaseDir } from '../../worker/privateDirectories.js';
import { createFlakeRepo, testFlake } from '../support/flakeRepo.js';
import { nixEnv, requireNix, tempDir } from '../support/nixStore.js';
import { startProtoServer } from '../support/protoServer.js';
import { spawnWorker } from '../support/workerProcess.js';

requireNix();
const dir = tempDir('kiln-worker-clones-');
const repo = createFlakeRepo(join(dir, 'repo'), { 'flake.nix': testFlake(randomUUID()) });

/** Every path under `root` whose mode lets group or others in: [path, octal mode]. */
function readableByOthers(root: string): [string, string][] {
  const found: [string, string][] = [];
  const walk = (path: string) => {
    const stat = lstatSync(path);
    if (stat.isSymbolicLink()) return;
    if ((stat.mode & 0o077) !== 0) found.push([path, (stat.mode & 0o777).toString(8)]);
    if (stat.isDirectory()) for (const name of readdirSync(path)) walk(join(path, name));
  };
  walk(root);
  return found;
}

/**
 * The entries under `root` another local account could reach were `root` itself open (each entry of
 * worker.baseDir is private on its own: docs/worker.md): open ones below directories it may traverse.
 */
function reachableByOthers(root: string): [string, string][] {
  const found: [string, string][] = [];
  const walk = (path: string) => {
    const stat = lstatSync(path);
    if (stat.isSymbolicLink()) return;
    if ((stat.mode & 0o077) !== 0) found.push([path, (stat.mode & 0o777).toString(8)]);
    if (stat.isDirectory() && (stat.mode & 0o011) !== 0) for (const name of readdirSync(path)) walk(join(path, name));
  };
  for (const name of readdirSync(root)) walk(join(root, name));
  return found;
}

t.test('two projects with the same URL get two clones, named by project, owner-only', async (t) => {
  const baseDir = join(dir, 'in-process');
  const [victim, thief] = [randomUUID(), randomUUID()];
  const first = await checkoutCommit(baseDir, victim, repo.url, repo.commit, process.env);
  const second = await checkoutCommit(baseDir, thief, repo.url, repo.commit, process.env);
  if (!first.ok || !second.ok) return t.fail(JSON.stringify([first, second]));
  t.equal(first.clone, join(baseDir, 'repos', victim));
  t.equal(second.clone, join(baseDir, 'repos', thief));
  t.not(first.clone, second.clone, 'the URL alone leads to no clone');
  t.equal(statSync(join(baseDir, 'repos')).mode & 0o777, 0o700);
  t.same(readableByOthers(first.clone), [], 'the clone and git\'s files in it are 0700/0600 (core.sharedRepository), whatever the umask');
});

t.test('a project id that is not a UUID never becomes a path', async (t) => {
  for (const id of ['../../etc', 'a/b', '', `${randomUUID()}/..`]) t.throws(() => cloneDirectory('/var/lib/kiln-worker', id), /not a UUID/, JSON.stringify(id));
  t.equal(cloneDirectory('/w', 'AAAAAAAA-BBBB-4CCC-8DDD-EEEEEEEEEEEE'), '/w/repos/aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee');
});

t.test('entries of an older, world-readable worker.baseDir are tightened at start', async (t) => {
  const baseDir = join(dir, 'older');
  mkdirSync(join(baseDir, 'repos', '0123abcd'), { recursive: true, mode: 0o755 });
  chmodSync(join(baseDir, 'repos'), 0o755);
  writeFileSync(join(baseDir, 'worker-id'), `${randomUUID()}\n`, { mode: 0o644 });
  const changed = await secureWorkerBaseDir(baseDir);
  t.same(changed.sort(), [join(baseDir, 'repos'), join(baseDir, 'worker-id')]);
  t.equal(statSync(join(baseDir, 'repos')).mode & 0o777, 0o700);
  t.equal(statSync(join(baseDir, 'worker-id')).mode & 0o777, 0o600);
  t.equal(statSync(join(baseDir, 'tmp')).mode & 0o777, 0o700, 'tmp is made owner-only up front');
});

t.test('Nix\'s sandbox setting is read from Nix itself', async (t) => {
  const off = await nixSandboxMode({ ...nixEnv(), NIX_CONFIG: 'sandbox = false' });
  t.equal(off, false);
  t.match(sandboxWarning(off), /sandbox is off.*other tenants/);
  const on = await nixSandboxMode({ ...nixEnv(), NIX_CONFIG: 'sandbox = true' });
  t.equal(on, true);
  t.equal(sandboxWarning(on), undefined, 'no warning with the sandbox on');
  t.equal(await nixSandboxMode({ ...nixEnv(), NIX_CONFIG: 'sandbox = relaxed' }), 'relaxed');
  t.match(sandboxWarning(undefined), /could not read/);
});

t.test('kiln worker warns about a sandbox that is off, and its clones are private under its umask', async (t) => {
  const project = randomUUID();
  const token = randomBytes(48).toString('base64url');
  const peersFile = join(dir, 'peers');
  writeFileSync(peersFile, `${project}:${token}\n`);
  const server = await startProtoServer({ tokens: { [project]: [token] } });
  const baseDir = join(dir, 'process');
  const worker = spawnWorker({ serverUrl: server.url, baseDir, peersFile });
  t.teardown(async () => {
    await worker.stop();
    await server.close();
  });
  const warning = await worker.waitForLog((line) => /sandbox/.test(line.msg));
  t.match(warning, { level: 40, msg: /sandbox is off/ });
  const session = await server.nextWorker();
  session.send({ t: 'evalJob', project, jobId: 'eval-1', repository: repo.url, commit: repo.commit, attributes: 'packages.x86_64-linux.base', timeoutSecs: 120 });
  const { final } = await session.evalOutcome('eval-1');
  t.equal(final.t, 'evalResult', final.t === 'jobFailed' ? final.failure.message : 'evaluated');
  // Nix sets its own umask (022): its caches under eval-cache are 0755/0644 inside a 0700 directory
  t.same(reachableByOthers(baseDir), [], 'nothing under worker.baseDir is reachable by group or others');
  t.same(readableByOthers(baseDir).filter(([path]) => !path.startsWith(join(baseDir, 'eval-cache/'))), [], 'and nothing outside Nix\'s caches is even open');
});
