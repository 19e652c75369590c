// Worker samples (docs/metrics.md, "Stored metrics: worker samples"), with a protocol-level worker
// against the real server and PostgreSQL: a pass writes what the worker's last heartbeat said, a
// worker without a heartbeat yet is skipped, and samples older than metrics.retention.rawDays go
// (at the boundary, not before).
import t from 'tap';
import { startTestKiln } from '../../support/kiln.js';
import { handshake, testHello } from '../../support/protoClient.js';
import { eventually } from '../../support/eventually.js';

const DAY = 86_400_000;

t.test('a sample per connected worker from its last heartbeat; raw samples kept rawDays', async (t) => {
  const kiln = await startTestKiln(t, { localWorker: true, 'metrics.retention.rawDays': 7 });
  const hello = testHello({ maxConcurrentBuilds: 6, maxConcurrentEvals: 2 });
  const worker = await handshake(`ws://127.0.0.1:${kiln.port}/proto`, hello);
  t.teardown(() => worker.close());
  await worker.next('welcome');
  await eventually(() => kiln.workers.connected().length === 1, { message: 'the worker is connected' });
  t.same(await kiln.upkeep.workerSamples(), { sampled: 0, deleted: 0 }, 'no heartbeat yet: nothing to sample');

  const load = { runningBuilds: 3, runningEvals: 1, load1: 2.5, memoryFreeBytes: 1 << 30, memoryTotalBytes: 4 * (1 << 30), storeFreeBytes: 123_456_789 };
  worker.send({ t: 'heartbeat', seq: 1, load });
  await eventually(() => kiln.workers.connected()[0]?.load !== null, { message: 'the heartbeat arrived' });
  t.same(await kiln.upkeep.workerSamples(), { sampled: 1, deleted: 0 });
  const rows = await kiln.sql`select worker_id, connection_id = ${kiln.workers.connected()[0]!.connectionId} as from_its_connection, load1, memory_free_bytes, memory_total_bytes, store_free_bytes, build_slots, builds_running, eval_slots, evals_running from worker_samples`;
  t.same(rows, [{
    worker_id: hello.workerId, from_its_connection: true, load1: 2.5, memory_free_bytes: String(1 << 30), memory_total_bytes: String(4 * (1 << 30)), store_free_bytes: '123456789',
    build_slots: 6, builds_running: 3, eval_slots: 2, evals_running: 1,
  }]);

  const [latest] = await kiln.sql<{ now: Date }[]>`select max(sampled_at) as now from worker_samples`;
  const now = latest!.now;
  await kiln.sql`insert into worker_samples (worker_id, sampled_at, load1, memory_free_bytes, memory_total_bytes, build_slots, builds_running, eval_slots, evals_running)
    values (${hello.workerId}, ${new Date(now.getTime() - 7 * DAY - 60_000)}, 1, 1, 1, 1, 0, 1, 0), (${hello.workerId}, ${new Date(now.getTime() - 7 * DAY + 60_000)}, 1, 1, 1, 1, 0, 1, 0)`;
  const pass = await kiln.upkeep.workerSamples();
  t.equal(pass.deleted, 1, 'the sample past rawDays went, the one a minute inside stayed');
  t.equal((await kiln.sql`select 1 from worker_samples`).length, 3);
});
