// The scheduler's job table (services/builds/schedulerJobs.ts) keeps ending jobs after their
// light actors left the tree in a subtree restart (docs/supervision.md): the rows are the truth,
// so a job still ends once — its count freed for placement — and a second end is refused; and a
// worker's running count follows its newest connection.
import t from 'tap';
import { createRootSupervisor } from '../../../supervisors/index.js';
import { JobTable } from '../../../services/builds/schedulerJobs.js';
import type { ConnectedWorker } from '../../../services/workers/index.js';

/** The fields of a connection the job table reads (the worker's id and its running count). */
const worker = (workerId: string) => ({ hello: { workerId }, running: { jobs: 0 } }) as unknown as ConnectedWorker;
const noProgress = { report: async () => undefined, forget: () => undefined };

t.test('a job whose actor a subtree restart dropped still ends once, and frees its worker', async (t) => {
  const root = createRootSupervisor({ now: () => 0, onEscalate: () => undefined });
  t.teardown(() => root.stop());
  // budget 0: the sibling's crash escalates, and the root restarts the whole scheduler subtree
  const scheduler = root.supervise({ id: 'scheduler', restartBudget: { maxRestarts: 0, withinMs: 10_000 } });
  const jobs = new JobTable(scheduler, noProgress);
  const w = worker('w1');
  const job = jobs.add({ kind: 'build', jobId: 'build:a:1', workerId: 'w1', derivationBuildId: 'a', attempt: 1, targetCaches: new Set() }, w);
  t.equal(jobs.running(w, 'build'), 1);

  const crashing = scheduler.spawnLight({
    id: 'sibling', kind: 'sibling', input: null,
    machine: { initial: 'on' as const, final: new Set<'on'>(), context: () => null, step: () => { throw new Error('sibling crashed'); } },
  });
  crashing.send({ type: 'go' });
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(job.actor.status, 'done', 'the restart dropped the job actor (rehydrate: null)');

  t.ok(jobs.end(job, { type: 'lost' }), 'the job still ends');
  t.equal(jobs.running(w, 'build'), 0, 'its worker slot is free again');
  t.equal(w.running.jobs, 0);
  t.same(jobs.all(), []);
  t.notOk(jobs.end(job, { type: 'succeeded' }), 'a second end is refused');
  t.equal(jobs.running(w, 'build'), 0, 'and counts nothing twice');
});

t.test('a worker that reconnects while jobs of its old connection run: its new connection counts them down to idle', async (t) => {
  const root = createRootSupervisor({ now: () => 0, onEscalate: () => undefined });
  t.teardown(() => root.stop());
  const jobs = new JobTable(root, noProgress);
  const old = worker('w2');
  const first = jobs.add({ kind: 'build', jobId: 'build:b:1', workerId: 'w2', derivationBuildId: 'b', attempt: 1, targetCaches: new Set() }, old);
  const reconnected = worker('w2');
  const second = jobs.add({ kind: 'build', jobId: 'build:c:1', workerId: 'w2', derivationBuildId: 'c', attempt: 1, targetCaches: new Set() }, reconnected);
  t.equal(reconnected.running.jobs, 2);
  t.ok(jobs.end(first, { type: 'lost' }));
  t.ok(jobs.end(second, { type: 'succeeded' }));
  t.equal(jobs.running(reconnected, 'build'), 0);
  t.equal(reconnected.running.jobs, 0, 'the connection operators see is idle again');
});
