// A build attempt whose worker is lost mid-build (a real `kiln worker` killed with SIGKILL while
// its builder runs in a cgroup) stops showing as running on GET /builds/{id}: the attempt keeps the
// last counters its heartbeats carried, with running: false (docs/metrics.md, "Build and
// evaluation statistics").
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { startTestKiln } from '../../support/kiln.js';
import { subscribedProject } from '../../support/subscribedProject.js';
import { createFlakeRepo } from '../../support/flakeRepo.js';
import { spawnWorker } from '../../support/workerProcess.js';
import { requireNix } from '../../support/nixStore.js';
import { eventually } from '../../support/eventually.js';
import { buildCgroupParent, cgroupRoot } from '../../support/cgroups.js';

requireNix();

// The builder runs until the test kills it (through its cgroup): the worker is killed while it builds.
const flake = (nonce: string) => `{
  outputs = { self }: {
    packages.x86_64-linux.long = derivation {
      name = "kiln-lost-reading"; system = "x86_64-linux"; builder = "/bin/sh"; PATH = "/bin:/usr/bin"; nonce = "${nonce}";
      args = [ "-c" "echo long starts; sleep 600; mkdir $out" ];
    };
  };
}
`;

interface Resources { attempt: number; running: boolean; wall_seconds: number }

t.test('the reading of an attempt whose worker was killed is no longer running', { timeout: 180_000 }, async (t) => {
  const root = cgroupRoot();
  if (root === null) return t.fail('this machine has no cgroup v2 hierarchy: build readings cannot be tested');
  const parent = buildCgroupParent(root);
  // the heartbeat every second (a third of the timeout): a reading comes soon after the build starts
  const kiln = await startTestKiln(t, { localWorker: true, 'proto.workerHeartbeatTimeoutSecs': 3 });
  const work = mkdtempSync(join(tmpdir(), 'kiln-lost-reading-'));
  t.teardown(() => {
    parent.remove();
    rmSync(work, { recursive: true, force: true });
  });
  const repo = createFlakeRepo(join(work, 'repo'), { 'flake.nix': flake(randomBytes(8).toString('hex')) });
  const { token } = await subscribedProject(kiln, { repository: repo.url, publicCache: true });

  const worker = spawnWorker({
    serverUrl: `ws://127.0.0.1:${kiln.port}/proto`, baseDir: join(work, 'w'),
    args: ['--build-metrics', '--build-cgroup', parent.path],
  });
  t.teardown(() => {
    worker.child.kill('SIGKILL');
  });
  const started = await kiln.api<string>('POST', '/projects/acme/app/evaluate', { token });
  if (started.error) throw new Error(String(started.message));
  const builds = await eventually(async () => (await kiln.api<{ build_id: string }[]>('GET', `/evals/${started.message}/builds`, { token })).message,
    { until: (b) => Array.isArray(b) && b.length === 1, timeout: 60_000, interval: 200, message: 'the evaluation records its build' });
  const buildId = builds[0]!.build_id;
  const readBuild = async () => (await kiln.api<{ status: string; resources: Resources | null }>('GET', `/builds/${buildId}`, { token })).message;

  const running = await eventually(readBuild, { until: (b) => b.resources?.running === true, timeout: 60_000, interval: 200, message: 'a heartbeat\'s reading of the running build' });
  t.equal(running.resources!.attempt, 1);

  worker.child.kill('SIGKILL');
  const lost = await eventually(readBuild, { until: (b) => b.status === 'queued', timeout: 60_000, interval: 200, message: 'the lost worker\'s build back in the queue' });
  t.match(lost.resources, { attempt: 1, running: false }, 'the lost attempt is not running');
  t.ok(lost.resources!.wall_seconds > 0, `it keeps its last reading: ${JSON.stringify(lost.resources)}`);
  const [row] = await kiln.sql<{ running: boolean }[]>`select running from build_resource_samples where attempt = 1`;
  t.equal(row?.running, false, 'the stored reading says so too');
});
