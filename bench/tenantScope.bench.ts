// `npm run bench -- tenant-scope [derivations] [runs]`: what the build-server tenant scope (issue 24,
// docs/builds.md "Whose completion") costs on the hot paths, on a recorded synthetic graph
// (default 10,000 derivations) of one building evaluation and no build worker:
// - the ready query (schedulerQueries.ts readyBuilds, limit 500), as it is and as it was at
//   session 16 (array_agg filters, no join condition), EXPLAIN ANALYZE execution time, median of
//   runs that alternate the two;
// - the restore pass's candidates (tenantScope.ts requeuedForOthers) on its partial index;
// - the claim's share lock when an evaluation starts building (tenantScope.ts lockScopedBuilds)
//   over the evaluation's builds, in a transaction rolled back.
import { connectSimWorker, recordGraph, startBenchServer } from './evalDriver.js';
import { loadAverage } from './childServer.js';
import { syntheticGraph } from './syntheticGraph.js';
import { readyBuilds } from '../services/builds/schedulerQueries.js';
import { requeuedForOthers } from '../services/builds/tenantScope.js';

const size = Number(process.argv[2] ?? 10_000);
const runs = Number(process.argv[3] ?? 9);

const server = await startBenchServer();
try {
  const evaluator = await connectSimWorker(server.protoUrl, { capabilities: { eval: true, build: false } });
  const recorded = await recordGraph(server, evaluator, syntheticGraph(size, { seed: `tenant-scope-${Date.now()}` }));
  const { sql } = server;
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const executionMs = async (text: string, parameters: unknown[] = []) => {
    const plan = await sql.unsafe(`explain (analyze, format json) ${text}`, parameters as never[]);
    return (plan[0] as unknown as { 'QUERY PLAN': { 'Execution Time': number }[] })['QUERY PLAN'][0]!['Execution Time'];
  };
  const now = new Date().toISOString();
  // the ready query's text as the scheduler sends it; its parameters are the clock's now and the limit
  const described = await readyBuilds(sql, 500, new Date(now)).describe();
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
    where db.status = 'queued' and db.ready and (db.not_before is null or db.not_before <= '${now}')
    group by db.id, d.id order by db.queued_at limit 500`;
  const candidates = await requeuedForOthers(sql, 500).describe();
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
               or (db.status = 'queued' and (db.ready or db.done_for is not null or db.failed_for is not null)))
        order by db.id for share of db`;
      throw Object.assign(new Error('rolled back'), { rolledBack: true });
    }).catch((e: unknown) => {
      if (!(e as { rolledBack?: boolean }).rolledBack) throw e;
    });
    lockTimes.push(performance.now() - started);
  }
  // the two ready queries alternate, so neither has the warmer cache
  const readyMs: number[] = [];
  const beforeMs: number[] = [];
  const candidatesMs: number[] = [];
  for (let i = 0; i < runs; i++) {
    readyMs.push(await executionMs(described.string, [now, 500]));
    beforeMs.push(await executionMs(readyBefore));
    candidatesMs.push(await executionMs(candidates.string, [500]));
  }
  console.log(JSON.stringify({
    derivations: size, queued: counts!.queued, ready: counts!.ready, runs,
    readyQueryMs: median(readyMs), readyQueryBeforeMs: median(beforeMs), restoreCandidatesMs: median(candidatesMs), claimLockMs: median(lockTimes),
    recordedToBuildingMs: Math.round(recorded.buildingAt - recorded.sentAt), load: loadAverage(),
  }, null, 1));
  evaluator.close();
} finally {
  await server.stop();
}
