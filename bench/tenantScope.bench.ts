// `npm run bench -- tenant-scope [derivations] [runs]`: what the build-server tenant scope (issue 24,
// docs/builds.md "Whose completion") costs on the hot paths, on a recorded synthetic graph
// (default 10,000 derivations) of one building evaluation and no build worker:
// - the ready query (schedulerQueries.ts readyBuilds, limit 500), as it is and as it was at
//   session 16 (array_agg filters, no join condition), EXPLAIN ANALYZE execution time, median;
// - the restore pass's candidates (tenantScope.ts requeuedForOthers) on its partial index;
// - the claim's share lock when an evaluation starts building (tenantScope.ts lockScopedBuilds)
//   over the evaluation's builds, in a transaction rolled back.
import { connectSimWorker, recordGraph, startBenchServer } from './evalDriver.js';
import { loadAverage } from './childServer.js';
import { syntheticGraph } from './syntheticGraph.js';

const size = Number(process.argv[2] ?? 10_000);
const runs = Number(process.argv[3] ?? 9);

const server = await startBenchServer();
try {
  const evaluator = await connectSimWorker(server.protoUrl, { capabilities: { eval: true, build: false } });
  const recorded = await recordGraph(server, evaluator, syntheticGraph(size, { seed: `tenant-scope-${Date.now()}` }));
  const { sql } = server;
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const explained = async (text: string) => {
    const times: number[] = [];
    for (let i = 0; i < runs; i++) {
      const plan = await sql.unsafe(`explain (analyze, format json) ${text}`);
      times.push((plan[0] as unknown as { 'QUERY PLAN': { 'Execution Time': number }[] })['QUERY PLAN'][0]!['Execution Time']);
    }
    return median(times);
  };
  const now = new Date().toISOString();
  const ready = `
    select db.id, d.drv_path, d.name, d.system, d.required_features, d.outputs, d.timeout_secs, d.max_silent_secs, db.attempts,
           d.prefer_local_build, db.substitute_misses, array_agg(distinct p.id) as projects, db.queued_at,
           array_agg(distinct coalesce(t.build_timeout_secs, -1)) as task_timeouts,
           array_agg(distinct coalesce(t.build_max_silent_secs, -1)) as task_max_silents
    from derivation_builds db join derivations d on d.id = db.derivation_id
    join builds b on b.derivation_build_id = db.id
    join evaluations e on e.id = b.evaluation_id and e.phase = 'building'
    join tasks t on t.id = e.task_id join projects p on p.id = t.project_id
      and ((db.done_for is null and db.failed_for is null) or not (p.organization_id = any(coalesce(db.done_for, '{}') || coalesce(db.failed_for, '{}'))))
    where db.status = 'queued' and db.inputs_remaining = 0 and (db.not_before is null or db.not_before <= '${now}')
    group by db.id, d.id order by db.queued_at limit 500`;
  const readyBefore = `
    select db.id, d.drv_path, d.name, d.system, d.required_features, d.outputs, d.timeout_secs, d.max_silent_secs, db.attempts,
           d.prefer_local_build, db.substitute_misses,
           coalesce(array_agg(distinct p.id) filter (where db.done_for is null or not (p.organization_id = any(db.done_for))), '{}') as projects, db.queued_at,
           coalesce(array_agg(distinct coalesce(t.build_timeout_secs, -1)) filter (where db.done_for is null or not (p.organization_id = any(db.done_for))), '{}') as task_timeouts,
           coalesce(array_agg(distinct coalesce(t.build_max_silent_secs, -1)) filter (where db.done_for is null or not (p.organization_id = any(db.done_for))), '{}') as task_max_silents
    from derivation_builds db join derivations d on d.id = db.derivation_id
    join builds b on b.derivation_build_id = db.id
    join evaluations e on e.id = b.evaluation_id and e.phase = 'building'
    join tasks t on t.id = e.task_id join projects p on p.id = t.project_id
    where db.status = 'queued' and db.inputs_remaining = 0 and (db.not_before is null or db.not_before <= '${now}')
    group by db.id, d.id order by db.queued_at limit 500`;
  const candidates = `select id from derivation_builds where status = 'queued' and (done_for is not null or failed_for is not null) order by id limit 500`;
  const [counts] = await sql<{ queued: number; ready: number }[]>`
    select count(*)::int as queued, count(*) filter (where inputs_remaining = 0)::int as ready from derivation_builds where status = 'queued'`;
  const lockTimes: number[] = [];
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    await sql.begin(async (tx) => {
      await tx`
        select db.id from derivation_builds db
        where db.id in (select derivation_build_id from builds where evaluation_id = ${recorded.evaluationId})
          and (db.status = 'started'
               or (db.status = 'queued' and (db.inputs_remaining = 0 or db.done_for is not null or db.failed_for is not null)))
        order by db.id for share of db`;
      throw Object.assign(new Error('rolled back'), { rolledBack: true });
    }).catch((e: unknown) => {
      if (!(e as { rolledBack?: boolean }).rolledBack) throw e;
    });
    lockTimes.push(performance.now() - started);
  }
  console.log(JSON.stringify({
    derivations: size, queued: counts!.queued, ready: counts!.ready, runs,
    readyQueryMs: await explained(ready), readyQueryBeforeMs: await explained(readyBefore),
    restoreCandidatesMs: await explained(candidates), claimLockMs: median(lockTimes),
    recordedToBuildingMs: Math.round(recorded.buildingAt - recorded.sentAt), load: loadAverage(),
  }, null, 1));
  evaluator.close();
} finally {
  await server.stop();
}
