// POST /builds/{id} against a real server and database (docs/builds.md, "Aborting or restarting
// one build"): an abort takes the build's queued dependents in its evaluation with it and ends
// the evaluation once nothing is left; a restart brings back the dependents it took down, with
// fresh attempts and readiness counters that let them run, but never one that also waits on
// another failed input. The graph rows are written directly; the running-build case, with a real
// worker and Nix, is in abortBuilds.process.test.ts.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { signUp } from '../../support/accounts.js';
import { startTestKiln, type TestKiln } from '../../support/kiln.js';
import { eventually } from '../../support/eventually.js';

let kiln: TestKiln;
let token: string;
let taskId: string;

t.before(async () => {
  kiln = await startTestKiln(t, { localWorker: true });
  ({ token } = await signUp(kiln, 'ada'));
  t.equal((await kiln.api('PUT', '/orgs', { token, body: { name: 'acme' } })).status, 200);
  t.equal((await kiln.api('PUT', '/projects/acme', { token, body: { name: 'app', repository: 'https://example.org/app.git', wildcard: 'packages.*' } })).status, 200);
  const [task] = await kiln.sql<{ id: string }[]>`
    insert into tasks (project_id, name) select id, 'default' from projects where name = 'app'
    on conflict (project_id, name) do update set name = excluded.name returning id`;
  taskId = task!.id;
});

type Status = 'queued' | 'started' | 'completed' | 'failed' | 'aborted';
interface Node { status: Status; reason?: string; inputs?: string[] }

/** A building evaluation with one build per node, each an entry point (their events are durable); inputs_remaining as the recorder sets it. */
async function seedEvaluation(nodes: Record<string, Node>): Promise<{ evaluation: string; build: Record<string, string>; derivationBuild: Record<string, string> }> {
  const [evaluation] = await kiln.sql<{ id: string }[]>`
    insert into evaluations (task_id, repository, commit, wildcard, phase)
    values (${taskId}, 'https://example.org/app.git', ${randomBytes(20).toString('hex')}, 'packages.*', 'building') returning id`;
  const derivation: Record<string, string> = {};
  const derivationBuild: Record<string, string> = {};
  const build: Record<string, string> = {};
  for (const name of Object.keys(nodes)) {
    const hash = randomBytes(16).toString('hex').slice(0, 32).replace(/[eotu]/g, 'a');
    const [row] = await kiln.sql<{ id: string }[]>`insert into derivations (drv_path, name, system, outputs)
      values (${`/nix/store/${hash}-${name}.drv`}, ${name}, 'x86_64-linux', ${kiln.sql.json({ out: `/nix/store/${hash}-${name}` })}) returning id`;
    derivation[name] = row!.id;
  }
  const done = (status: Status) => status === 'completed';
  for (const [name, node] of Object.entries(nodes)) {
    for (const input of node.inputs ?? []) await kiln.sql`insert into derivation_edges (derivation_id, depends_on, outputs) values (${derivation[name]!}, ${derivation[input]!}, ${['out']})`;
    const remaining = (node.inputs ?? []).filter((input) => !done(nodes[input]!.status)).length;
    const failed = node.status === 'failed';
    const [row] = await kiln.sql<{ id: string }[]>`
      insert into derivation_builds (derivation_id, status, failure_class, failure_reason, attempts, inputs_remaining, ready)
      values (${derivation[name]!}, ${node.status}, ${failed ? 'FailedPermanent' : null}, ${failed ? node.reason ?? 'builder_failed' : null}, ${failed ? 3 : 0}, ${remaining}, ${remaining === 0})
      returning id`;
    derivationBuild[name] = row!.id;
    const [b] = await kiln.sql<{ id: string }[]>`insert into builds (evaluation_id, derivation_build_id, entry_point, attr) values (${evaluation!.id}, ${row!.id}, true, ${`packages.${name}`}) returning id`;
    build[name] = b!.id;
  }
  return { evaluation: evaluation!.id, build, derivationBuild };
}

const act = (buildId: string, method: string) => kiln.api<string>('POST', `/builds/${buildId}`, { token, body: { method } });

async function statuses(derivationBuild: Record<string, string>): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [name, id] of Object.entries(derivationBuild)) {
    const [row] = await kiln.sql<{ status: string; attempts: number; inputs_remaining: number }[]>`select status, attempts, inputs_remaining from derivation_builds where id = ${id}`;
    out[name] = `${row!.status}/${row!.attempts}/${row!.inputs_remaining}`;
  }
  return out;
}

const phase = async (id: string) => (await kiln.sql<{ phase: string }[]>`select phase from evaluations where id = ${id}`)[0]!.phase;

t.test('an abort takes the queued builds that need it along, then the evaluation ends', async (t) => {
  const seeded = await seedEvaluation({
    a: { status: 'queued' }, b: { status: 'queued', inputs: ['a'] }, c: { status: 'queued', inputs: ['b'] }, other: { status: 'queued' },
  });
  const aborted = await act(seeded.build['a']!, 'abort');
  t.equal(aborted.status, 200, aborted.message);
  t.same(await statuses(seeded.derivationBuild), { a: 'aborted/0/0', b: 'aborted/0/1', c: 'aborted/0/1', other: 'queued/0/0' }, 'a and what needs it end; the rest stays');
  const [event] = await kiln.sql<{ body: string }[]>`select body from event_outbox where event = 'build.aborted' and build_id = ${seeded.build['c']!}`;
  t.ok(event, 'each aborted build has build.aborted (durable for entry points)');
  t.equal(await phase(seeded.evaluation), 'building', 'another build is still queued');
  t.equal((await act(seeded.build['other']!, 'abort')).status, 200);
  t.equal(await phase(seeded.evaluation), 'completed', 'nothing is left to run');
  const late = await act(seeded.build['a']!, 'restart');
  t.equal(late.status, 409);
  t.equal(late.code, 'evaluation_finished');
  t.match(late.message, /restart the evaluation/, 'the answer says what to do instead');
});

t.test('a restart brings back what it took down, with fresh attempts', async (t) => {
  const seeded = await seedEvaluation({
    a: { status: 'failed' }, x: { status: 'failed' },
    b: { status: 'failed', reason: 'dependency_failed', inputs: ['a'] },
    c: { status: 'failed', reason: 'dependency_failed', inputs: ['b', 'x'] },
    open: { status: 'queued' },
  });
  const blocked = await act(seeded.build['b']!, 'restart');
  t.equal(blocked.status, 409);
  t.equal(blocked.code, 'build_inputs_failed', 'b cannot run while a stays failed');
  t.same(await statuses(seeded.derivationBuild), { a: 'failed/3/0', x: 'failed/3/0', b: 'failed/3/1', c: 'failed/3/2', open: 'queued/0/0' }, 'a refusal changes nothing');

  // two of a's three dispatches were declines (docs/builds.md, "Declined builds"): a fresh count forgets them too
  await kiln.sql`update derivation_builds set declines = 2 where id = ${seeded.derivationBuild['a']!}`;
  const restarted = await act(seeded.build['a']!, 'restart');
  t.equal(restarted.status, 200, restarted.message);
  t.equal((await kiln.sql<{ declines: number }[]>`select declines from derivation_builds where id = ${seeded.derivationBuild['a']!}`)[0]!.declines, 0,
    'the declines go back to 0 with the attempts');
  t.same(await statuses(seeded.derivationBuild), { a: 'queued/0/0', x: 'failed/3/0', b: 'queued/0/1', c: 'failed/3/2', open: 'queued/0/0' },
    'a is ready at once, b waits for it, c stays failed: x, another input of it, failed and stays failed');
  const again = await act(seeded.build['a']!, 'restart');
  t.equal(again.code, 'build_not_failed');
});

t.test('an abort answers what cannot be aborted; bad input is a 400 naming it', async (t) => {
  const seeded = await seedEvaluation({ done: { status: 'completed' }, waiting: { status: 'queued', inputs: ['done'] } });
  const finished = await act(seeded.build['done']!, 'abort');
  t.equal(finished.status, 409);
  t.equal(finished.code, 'build_finished');
  const method = await act(seeded.build['waiting']!, 'explode');
  t.equal(method.status, 400);
  t.match(method.message, /method/);
  const id = await kiln.api<string>('POST', '/builds/not-a-uuid', { token, body: { method: 'abort' } });
  t.equal(id.status, 400);
  t.equal((await act('0e0e0e0e-0000-4000-8000-00000000ffff', 'abort')).status, 404);
  t.same(await statuses(seeded.derivationBuild), { done: 'completed/0/0', waiting: 'queued/0/0' });
});

t.test('an abort racing another evaluation\'s recording of the same build sees that evaluation once it has the lock', async (t) => {
  // A recording (graphRecorder.ts) inserts its builds row and commits a moment later; the abort's
  // row lock waits for that commit, and the check for other open evaluations must read after it,
  // or one tenant's abort stops a build another tenant's evaluation has just reached.
  const seeded = await seedEvaluation({ a: { status: 'queued' }, keep: { status: 'queued' } });
  const other = await seedEvaluation({ mine: { status: 'queued' } });
  let commit!: () => void;
  const committed = new Promise<void>((resolve) => (commit = resolve));
  const recording = kiln.sql.begin(async (tx) => {
    await tx`insert into builds (evaluation_id, derivation_build_id) values (${other.evaluation}, ${seeded.derivationBuild['a']!})`;
    await committed;
  });
  const abort = act(seeded.build['a']!, 'abort');
  await eventually(async () => (await kiln.sql`select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`).length > 0,
    { message: 'the abort waits for the recording\'s lock' });
  commit();
  await recording;
  const answer = await abort;
  t.equal(answer.status, 409, answer.message);
  t.equal(answer.code, 'build_shared', 'the other open evaluation wants the build now');
  t.same(await statuses({ a: seeded.derivationBuild['a']! }), { a: 'queued/0/0' }, 'the build stays queued');
});
