// A worker that goes silent mid-build (frozen with SIGSTOP, its TCP connection still open) is
// declared dead after the (shortened) heartbeat timeout; its build is re-queued and finished by a
// second worker.
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

requireNix();

const flake = (nonce: string) => `{
  outputs = { self }: {
    packages.x86_64-linux.slow = derivation {
      name = "kiln-loss-slow"; system = "x86_64-linux"; builder = "/bin/sh"; PATH = "/bin:/usr/bin"; nonce = "${nonce}";
      args = [ "-c" "echo slow starts; sleep 4; mkdir $out; echo done > $out/data" ];
    };
  };
}
`;

t.test('a silent worker\'s build is re-queued and finished by another worker', { timeout: 120_000 }, async (t) => {
  const kiln = await startTestKiln(t, { localWorker: true, 'proto.workerHeartbeatTimeoutSecs': 3 });
  const work = mkdtempSync(join(tmpdir(), 'kiln-loss-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));
  const repo = createFlakeRepo(join(work, 'repo'), { 'flake.nix': flake(randomBytes(8).toString('hex')) });
  const { token } = await subscribedProject(kiln, { repository: repo.url, publicCache: true });

  const first = spawnWorker({ serverUrl: `ws://127.0.0.1:${kiln.port}/proto`, baseDir: join(work, 'w1') });
  t.teardown(() => {
    first.child.kill('SIGKILL');
  });
  const started = await kiln.api<string>('POST', '/projects/acme/app/evaluate', { token });
  if (started.error) throw new Error(String(started.message));
  const evaluationId = started.message;

  const building = await eventually(async () => (await kiln.sql<{ status: string; worker_id: string | null }[]>`
      select db.status, db.worker_id from builds b join derivation_builds db on db.id = b.derivation_build_id where b.evaluation_id = ${evaluationId}`)[0],
  { until: (row) => row?.status === 'started', timeout: 60_000, interval: 100, message: 'the first worker starts the build' });
  const firstWorker = building!.worker_id!;
  first.child.kill('SIGSTOP');
  const second = spawnWorker({ serverUrl: `ws://127.0.0.1:${kiln.port}/proto`, baseDir: join(work, 'w2') });
  t.teardown(() => second.stop());

  await eventually(async () => {
    const got = await kiln.api<{ phase: string }>('GET', `/evals/${evaluationId}`, { token });
    if (got.error) throw new Error(String(got.message));
    return got.message.phase;
  }, { until: (phase) => ['completed', 'failed', 'aborted'].includes(phase), timeout: 60_000, interval: 200, message: 'the evaluation ends' });
  const [build]
 = await kiln.sql<{ status: string; worker_id: string; attempts: number }[]>`
    select db.status, db.worker_id, db.attempts from builds b join derivation_builds db on db.id = b.derivation_build_id where b.evaluation_id = ${evaluationId}`;
  t.equal(build?.status, 'completed');
  t.not(build?.worker_id, firstWorker, 'the second worker finished it');
  const [closed] = await kiln.sql<{ close_code: string }[]>`select close_code from worker_connections where worker_id = ${firstWorker}`;
  t.equal(closed?.close_code, 'heartbeat_timeout');
});
