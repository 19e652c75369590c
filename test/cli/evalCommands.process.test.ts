// `kiln project evaluate`, `task evaluate --watch`, `eval show|watch|abort` and `build
// show|log|closure` against one real server with a real `kiln worker` and real Nix. A build waits
// for a gate file the test creates, so the live commands are seen following it while it runs:
// `eval watch` piped (--json) and in a pseudo-terminal (the progress bar and the builds redrawn),
// `build log --follow` printing the log before the build ends.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { startTestKiln } from '../support/kiln.js';
import { signUp } from '../support/accounts.js';
import { createFlakeRepo } from '../support/flakeRepo.js';
import { spawnWorker } from '../support/workerProcess.js';
import { requireNix } from '../support/nixStore.js';
import { eventually } from '../support/eventually.js';
import { kilnCli, startKilnCli, cliProject } from '../support/kilnCli.js';

requireNix();

const TIMEOUT = Number(process.env['KILN_FLOW_TIMEOUT'] ?? 240_000);

/** packages: base, app (waits for `gate`), broken; legacyPackages.stuck waits for a gate never opened. */
const flake = (nonce: string, gate: string) => `{
  outputs = { self }: let
    system = "x86_64-linux";
    mk = name: script: derivation { inherit name system; builder = "/bin/sh"; args = [ "-c" script ]; PATH = "/bin:/usr/bin"; nonce = "${nonce}"; };
  in {
    packages.\${system} = rec {
      base = mk "kiln-cli-base" "echo building base; mkdir $out; echo base > $out/data";
      app = mk "kiln-cli-app" "echo before the gate; while [ ! -e ${gate} ]; do sleep 0.1; done; echo after the gate; mkdir $out; cat \${base}/data > $out/copied; echo \${base} > $out/base";
      broken = mk "kiln-cli-broken" "echo about to fail; exit 3";
    };
    legacyPackages.\${system}.stuck = mk "kiln-cli-stuck" "echo stuck; while [ ! -e ${gate}-never ]; do sleep 0.1; done; touch $out";
  };
}
`;

interface Build { build_id: string; name: string; status: string; failure: { class: string } | null; outputs: Record<string, string> }
interface Evaluation { id: string; phase: string; builds: { total: number; completed: number; failed: number } }

t.test('evaluations and builds from the CLI, live', { timeout: TIMEOUT }, async (t) => {
  // localWorker: the spawned worker connects over loopback without a peer token.
  const kiln = await startTestKiln(t, { localWorker: true, 'build.retryBackoffSecs': 0 });
  const work = mkdtempSync(join(tmpdir(), 'kiln-cli-eval-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));
  const gate = join(work, 'gate');
  const repo = createFlakeRepo(join(work, 'repo'), { 'flake.nix': flake(randomBytes(8).toString('hex'), gate) });
  const worker = spawnWorker({ serverUrl: `ws://127.0.0.1:${kiln.port}/proto`, baseDir: join(work, 'worker') });
  t.teardown(() => worker.stop());

  const ada = await signUp(kiln, 'ada');
  const env = await cliProject(t, kiln, ada.token, work, repo.url);

  const started = await kilnCli(['project', 'evaluate', 'acme/app', '--json'], env);
  t.equal(started.status, 0, started.stderr);
  const id = (started.json as { evaluation: string }).evaluation;
  t.match(id, /^[0-9a-f-]{36}$/);

  // Both watchers follow the evaluation from before its builds exist.
  const piped = startKilnCli(['eval', 'watch', id, '--json'], env);
  const lines = startKilnCli(['eval', 'watch', id], env);
  const terminal = startKilnCli(['eval', 'watch', id], env, { terminal: true });

  const builds = async () => (await kiln.api<Build[]>('GET', `/evals/${id}/builds`, { token: ada.token })).message;
  const app = await eventually(async () => (await builds()).find((b) => b.name === 'kiln-cli-app' && b.status === 'started'), { timeout: TIMEOUT / 2, interval: 200, message: 'the app build starts' });

  await t.test('build log --follow prints the log while the build runs, and ends with it', async (t) => {
    const follow = startKilnCli(['build', 'log', app.build_id, '--follow'], env);
    try {
      await follow.waitFor(/before the gate/);
      t.notMatch(follow.output(), /after the gate/, 'the build has not passed the gate');
      const inTerminal = await terminal.waitFor(/started +kiln-cli-app/);
      t.match(inTerminal, /\[[#-]{30}\] +\d\/3/, 'the progress bar, while the build runs');
    } finally {
      writeFileSync(gate, ''); // whatever failed above, the evaluation ends and the rest can run
    }
    const run = await follow.done;
    t.equal(run.status, 0, run.stderr);
    t.match(run.stdout, /before the gate\n(.*\n)*after the gate/);
    t.match(run.stderr, /build kiln-cli-app completed/);
  });

  await t.test('eval watch: the evaluation with its builds; exit 1 for the failed build', async (t) => {
    const run = await piped.done;
    t.equal(run.status, 1, run.stderr);
    const result = run.json as { evaluation: Evaluation; builds: Build[] };
    t.match(result.evaluation, { id, phase: 'completed', builds: { total: 3, completed: 2, failed: 1 } });
    t.same(result.builds.map((b) => [b.name, b.status]).sort(), [['kiln-cli-app', 'completed'], ['kiln-cli-base', 'completed'], ['kiln-cli-broken', 'failed']]);
    const text = await lines.done;
    t.equal(text.status, 1);
    t.match(text.stderr, /^completed +kiln-cli-app$/m, 'one line per build that moved');
    t.match(text.stderr, /^failed +kiln-cli-broken \(FailedPermanent\)$/m);
    t.match(text.stdout, /^Phase: +completed$/m);
    t.match(text.stdout, /^BUILD +NAME +STATUS +ATTRIBUTE$/m);
    const shown = await terminal.done;
    t.equal(shown.status, 1);
    t.match(shown.stdout, /\x1b\[\d+F\x1b\[J/, 'the block is redrawn in place');
    t.match(shown.stdout, /failed \(FailedPermanent\) +packages\.x86_64-linux\.broken/);
  });

  await t.test('eval show and build show, log, closure', async (t) => {
    const show = await kilnCli(['eval', 'show', id, '--json'], env);
    t.match(show.json, { evaluation: { id, phase: 'completed' }, builds: [{}, {}, {}] });
    const finished = (show.json as { builds: Build[] }).builds;
    const broken = finished.find((b) => b.name === 'kiln-cli-broken')!;
    const built = await kilnCli(['build', 'show', app.build_id, '--json'], env);
    t.match(built.json, { build_id: app.build_id, status: 'completed', outputs: { out: /-kiln-cli-app$/ } });
    t.match((await kilnCli(['build', 'show', broken.build_id], env)).stdout, /^Failure: +FailedPermanent/m);
    const log = await kilnCli(['build', 'log', broken.build_id], env);
    t.equal(log.status, 0);
    t.match(log.stdout, /about to fail/);
    const followed = await kilnCli(['build', 'log', broken.build_id, '--follow', '--json'], env);
    t.equal(followed.status, 1, 'following a failed build ends at once, failing');
    t.match(followed.json, { build_id: broken.build_id, status: 'failed', log: /about to fail/ });
    const closure = await kilnCli(['build', 'closure', app.build_id, '--runtime', '--json'], env);
    t.match(closure.json, { node_count: 2, truncated: false });
    const tree = await kilnCli(['build', 'closure', app.build_id, '--runtime'], env);
    t.match(tree.stdout, /^kiln-cli-app \(.*closure .*\)\n└── kiln-cli-base \(/, 'app, then what it refers to');
    const buildTime = await kilnCli(['build', 'closure', app.build_id], env);
    t.match(buildTime.stdout, /2 paths, 1 references/);
    const unknown = await kilnCli(['build', 'show', '00000000-0000-4000-8000-000000000000', '--json'], env);
    t.equal(unknown.status, 1);
    t.match(unknown.json, { code: 'not_found' });
  });

  await t.test('task evaluate --watch: exit 0 when everything built', async (t) => {
    const run = await kilnCli(['task', 'evaluate', 'acme/app', 'default', '--commit', repo.commit, '--attr', 'packages.x86_64-linux.base', '--watch', '--json'], env);
    t.equal(run.status, 0, run.stderr);
    t.match(run.json, { evaluation: { phase: 'completed', commit: repo.commit, attr: 'packages.x86_64-linux.base', builds: { failed: 0 } } });
  });

  await t.test('eval abort stops a running evaluation; watching it then exits 1', async (t) => {
    const made = await kilnCli(['task', 'evaluate', 'acme/app', 'default', '--attr', 'legacyPackages.x86_64-linux.stuck', '--json'], env);
    t.equal(made.status, 0, made.stderr);
    const stuck = (made.json as { evaluation: string }).evaluation;
    await eventually(async () => (await kiln.api<Build[]>('GET', `/evals/${stuck}/builds`, { token: ada.token })).message.some((b) => b.status === 'started'),
      { timeout: TIMEOUT / 4, interval: 200, message: 'the stuck build starts' });
    const aborted = await kilnCli(['eval', 'abort', stuck, '--json'], env);
    t.equal(aborted.status, 0, aborted.stderr);
    t.match(aborted.json, { id: stuck, phase: 'aborted' });
    const watched = await kilnCli(['eval', 'watch', stuck, '--json'], env);
    t.equal(watched.status, 1);
    t.match(watched.json, { evaluation: { phase: 'aborted' } });
    const bob = await signUp(kiln, 'bob');
    const hidden = await kilnCli(['eval', 'watch', stuck, '--json'], { ...env, KILN_TOKEN: bob.token });
    t.equal(hidden.status, 1, 'another tenant cannot watch it');
    t.match(hidden.json, { error: true, code: 'not_found' });
  });
});
