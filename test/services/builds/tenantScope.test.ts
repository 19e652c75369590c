// Whose completion (docs/builds.md, "Build servers: whose completion"; migration 0072): a build
// completed on an organization's build server stands for that organization only. Another
// organization's evaluation that reaches it queues it again for itself, whether it records the
// derivation after the completion or already wanted it when the completion committed; the ready
// query then offers it for the other organization's projects only (so that server's worker, which
// serves its own organization, never takes it again); and when the other organization leaves,
// nothing is left wanting it and it is restored as it was. The real-Nix case, with a hostile
// server, is test/cli/buildServersTenants.process.test.ts.
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { PROTOCOL_VERSION, type MessageOf } from '../../../protocol/index.js';
import { applyStatusChanges, changeBuildStatuses, type StatusChange } from '../../../services/builds/buildStatus.js';
import { restorable } from '../../../services/builds/tenantScope.js';
import { recordEvalBatch } from '../../../services/builds/graphRecorder.js';
import { readyBuilds, type ReadiedBuild } from '../../../services/builds/schedulerQueries.js';
import { testDatabase } from '../../support/db.js';
import { derivationNode, type DerivationNodeFixture } from '../../support/derivationNodes.js';
import { insertProject } from '../../support/modelRows.js';
import { testEvents } from '../../support/testEvents.js';

t.test('a build server\'s completion stands for its organization only', async (t) => {
  const db = await testDatabase(t);
  const { events } = await testEvents(t, db);
  const acmeProject = await insertProject(db.sql, 'acme', 'app');
  const betaProject = await insertProject(db.sql, 'beta', 'app');
  const orgOf = async (project: string) => (await db.sql<{ organization_id: string }[]>`select organization_id from projects where id = ${project}`)[0]!.organization_id;
  const acme = await orgOf(acmeProject);
  const beta = await orgOf(betaProject);
  const serverOf = async (org: string, name: string) =>
    (await db.sql<{ id: string }[]>`insert into servers (organization_id, name, host) values (${org}, ${name}, 'box.test') returning id`)[0]!.id;
  const acmeServer = await serverOf(acme, 'box');
  const betaServer = await serverOf(beta, 'box');

  const evaluation = async (project: string) => {
    const [task] = await db.sql<{ id: string }[]>`
      insert into tasks (project_id, name) values (${project}, 'default')
      on conflict (project_id, name) do update set name = excluded.name returning id`;
    const id = randomUUID();
    await db.sql`insert into evaluations (id, task_id, repository, wildcard, phase) values (${id}, ${task!.id}, 'file:///nonexistent', '*', 'building')`;
    return id;
  };
  const record = (evaluationId: string, nodes: DerivationNodeFixture[]) => {
    const batch: MessageOf<'evalBatch'> = { v: PROTOCOL_VERSION, t: 'evalBatch', jobId: `eval:${evaluationId}:1`, derivations: nodes.map((n) => n.derivation), attributes: [], errors: [] };
    return recordEvalBatch(events, evaluationId, batch);
  };
  const idOf = async (node: DerivationNodeFixture) =>
    (await db.sql<{ id: string }[]>`select db.id from derivation_builds db join derivations d on d.id = db.derivation_id where d.drv_path = ${node.drvPath}`)[0]!.id;
  const row = async (node: DerivationNodeFixture) =>
    (await db.sql<{ status: string; done_for: string[] | null; inputs_remaining: number }[]>`
      select db.status, db.done_for, db.inputs_remaining from derivation_builds db join derivations d on d.id = db.derivation_id where d.drv_path = ${node.drvPath}`)[0]!;
  /** the ready builds among these nodes, each with the projects it is offered for */
  const ready = async (nodes: DerivationNodeFixture[]) => {
    const names = new Map(nodes.map((n) => [n.drvPath, n.derivation.name]));
    const projectName = new Map([[acmeProject, 'acme'], [betaProject, 'beta']]);
    return Object.fromEntries((await readyBuilds(db.sql, 1000, new Date())).filter((r) => names.has(r.drv_path))
      .map((r) => [names.get(r.drv_path)!, r.projects.map((p) => projectName.get(p)).sort()]));
  };
  const change = (ids: string[], c: StatusChange) => changeBuildStatuses(events, ids.map((id) => ({ id, change: c })));
  const buildOn = async (node: DerivationNodeFixture, workerId: string, told: Pick<StatusChange, 'readied'> = {}) => {
    const id = await idOf(node);
    await change([id], { event: { type: 'dispatch' }, workerId });
    await change([id], { event: { type: 'succeed' }, ...told });
  };

  t.test('reached after the completion: queued again for the other organization, offered to its projects only', async (t) => {
    const dep = derivationNode('dep');
    const top = derivationNode('top', [dep.drvPath]);
    const acmeEval = await evaluation(acmeProject);
    await record(acmeEval, [dep, top]);
    await buildOn(dep, acmeServer);
    t.match(await row(dep), { status: 'completed', done_for: [acme] }, 'completed, standing for acme');
    t.same(await ready([dep, top]), { top: ['acme'] }, 'acme\'s build of top goes on');

    const betaEval = await evaluation(betaProject);
    await record(betaEval, [dep, top]);
    t.match(await row(dep), { status: 'queued', done_for: [acme] }, 'beta does not take acme\'s server\'s word: queued again, acme remembered');
    t.equal((await row(top)).inputs_remaining, 1, 'top waits for dep again');
    t.same(await ready([dep, top]), { dep: ['beta'] }, 'offered to beta\'s projects only: acme\'s server serves none of them');

    await buildOn(dep, betaServer);
    t.match(await row(dep), { status: 'completed', done_for: [acme, beta].sort() }, 'beta\'s own server adds beta');
    t.same(await ready([dep, top]), { top: ['acme', 'beta'] });
    await record(await evaluation(betaProject), [dep, top]);
    t.equal((await row(dep)).status, 'completed', 'a later beta evaluation takes it as built');
  });

  t.test('wanted by the other organization when the completion commits: queued again in the same transaction', async (t) => {
    const dep = derivationNode('dep');
    const top = derivationNode('top', [dep.drvPath]);
    const acmeEval = await evaluation(acmeProject);
    const betaEval = await evaluation(betaProject);
    await record(acmeEval, [dep, top]);
    await record(betaEval, [dep, top]);
    const readied: string[] = [];
    await buildOn(dep, acmeServer, { readied: (rows: ReadiedBuild[]) => readied.push(...rows.map((r) => r.drv_path)) });
    t.match(await row(dep), { status: 'queued', done_for: [acme] });
    t.same(readied, [], 'top was never made ready on an output beta cannot read');
    t.equal((await row(top)).inputs_remaining, 1);
    t.same(await ready([dep, top]), { dep: ['beta'] });

    // The scheduler restores a build ready for no project, but only once no open evaluation of
    // another organization wants it: one still evaluating is not offered builds yet.
    const restore = (ids: string[]) => events.transaction(async (tx, emit) => applyStatusChanges(tx, emit, await restorable(tx, ids), { event: { type: 'restore' } }));
    await db.sql`update evaluations set phase = 'evaluating' where id = ${betaEval}`;
    t.same(await ready([dep, top]), { dep: [] }, 'ready for no project while beta evaluates');
    t.same(await restore([await idOf(dep)]), [], 'not restored: beta still wants it');
    await db.sql`update evaluations set phase = 'aborted' where id = ${betaEval}`;
    t.same(await restore([await idOf(dep)]), [await idOf(dep)], 'beta left: restored');
    t.match(await row(dep), { status: 'completed', done_for: [acme] }, 'standing for acme, as it did');
    t.equal((await row(top)).inputs_remaining, 0, 'acme\'s top is ready again');
    t.same(await ready([dep, top]), { top: ['acme'] });
  });

  t.test('kiln\'s own worker\'s completion stands for every tenant', async (t) => {
    const dep = derivationNode('dep');
    const acmeEval = await evaluation(acmeProject);
    await record(acmeEval, [dep]);
    await buildOn(dep, acmeServer);
    await record(await evaluation(betaProject), [dep]);
    t.equal((await row(dep)).status, 'queued');
    await buildOn(dep, randomUUID());
    t.match(await row(dep), { status: 'completed', done_for: null }, 'built by a shared worker: done for everyone');
    await record(await evaluation(betaProject), [dep]);
    t.equal((await row(dep)).status, 'completed');
  });
});
