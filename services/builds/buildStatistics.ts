// Per-build and per-evaluation statistics (docs/metrics.md, "Build and evaluation statistics"):
// each build attempt that ends on a worker leaves a sample with its wall-clock time and, when the
// worker measured them (worker.build.metrics), its cgroup's CPU time, peak memory, disk I/O and
// OOM kills; an evaluation keeps its job's wall-clock time and the evaluator's statistics
// (worker.eval.metrics). While a build runs, its worker's heartbeats keep a running sample of its
// counters so far, which the result replaces; an attempt that ends without a result keeps them,
// no longer running. Samples go retentionDays after they were recorded.
import type { Sql, TransactionSql } from 'postgres';
import type { BuildResources, BuildResourcesView, EvalStats, EvaluationStatistics as EvaluationStatsView, FlakeGraph } from '../../protocol/index.js';
import { deleteInSlices, retentionCutoff } from '../../storage/index.js';

export interface BuildSample {
  derivationBuildId: string;
  attempt: number;
  workerId: string;
  wallMs: number;
  resources: BuildResources | null;
}

/** What GET /builds/{id} shows of the latest attempt's sample, and what GET /evals/{id} shows of the evaluation (protocol/api). */
export type { BuildResourcesView, EvaluationStatistics as EvaluationStatsView } from '../../protocol/index.js';

const ms = (seconds: number) => Math.round(seconds * 1000);

/**
 * Writes the samples of the builds that end in the same event-loop turn in one multi-row insert,
 * one insert at a time: the samples that arrive while one is under way go in the next (at
 * thousands of results a second, a statement per build, then one per turn, were the dispatch
 * loop's largest count of statements, issue 23). record() settles once its sample is written; a
 * batch the database refuses is written again one sample at a time, so one bad sample costs only itself.
 */
export class BuildSampleWriter {
  private pending: PendingSample[] = [];
  private scheduled = false;
  /** the insert under way: the samples recorded meanwhile wait for it */
  private writing = false;

  constructor(private readonly sql: Sql, private readonly now: () => Date) {}

  record(sample: BuildSample): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.pending.push({ sample, at: this.now(), resolve, reject });
      if (this.scheduled || this.writing) return;
      this.scheduled = true;
      setImmediate(() => {
        this.scheduled = false;
        this.flush();
      });
    });
  }

  private flush(): void {
    const batch = this.pending.splice(0);
    if (batch.length === 0) return;
    this.writing = true;
    void this.write(batch).finally(() => {
      this.writing = false;
      this.flush();
    });
  }

  private async write(batch: readonly PendingSample[]): Promise<void> {
    try {
      await insertBuildSamples(this.sql, batch);
      for (const p of batch) p.resolve();
    } catch (error) {
      if (batch.length === 1) return batch[0]!.reject(error);
      for (const p of batch) await this.write([p]);
    }
  }
}

/** A build's sample and when it was taken. */
export interface TimedSample {
  sample: BuildSample;
  at: Date;
}

interface PendingSample extends TimedSample {
  resolve(): void;
  reject(error: unknown): void;
}

/** PostgreSQL's int: a worker may count past it (the protocol takes any safe integer); the sample keeps the column's largest. */
const MAX_INT = 2_147_483_647;

/**
 * Writes samples in one statement; also inside a completion's transaction (buildOutcomes.ts), so
 * nothing a worker sends may make it fail: every value is in its column's range (the protocol's
 * checks, and oom_kills clamped to int).
 */
export function insertBuildSamples(sql: Sql | TransactionSql, batch: readonly TimedSample[]) {
  const column = <T>(of: (s: BuildSample, r: BuildResources | null) => T) => batch.map(({ sample }) => of(sample, sample.resources));
  return sql`
    insert into build_resource_samples (derivation_build_id, attempt, recorded_at, worker_id, wall_ms, cpu_user_ms, cpu_system_ms,
      peak_memory_bytes, io_read_bytes, io_write_bytes, oom_kills)
    select * from unnest(${column((s) => s.derivationBuildId)}::uuid[], ${column((s) => s.attempt)}::int[], ${batch.map((b) => b.at.toISOString())}::timestamptz[],
      ${column((s) => s.workerId)}::uuid[], ${column((s) => s.wallMs)}::bigint[], ${column((_, r) => (r ? ms(r.cpuUserSeconds) : null))}::bigint[],
      ${column((_, r) => (r ? ms(r.cpuSystemSeconds) : null))}::bigint[], ${column((_, r) => r?.peakMemoryBytes ?? null)}::bigint[],
      ${column((_, r) => r?.ioReadBytes ?? null)}::bigint[], ${column((_, r) => r?.ioWriteBytes ?? null)}::bigint[], ${column((_, r) => (r?.oomKills == null ? null : Math.min(r.oomKills, MAX_INT)))}::int[])
    on conflict (derivation_build_id, attempt) do update set recorded_at = excluded.recorded_at, worker_id = excluded.worker_id, wall_ms = excluded.wall_ms,
      cpu_user_ms = excluded.cpu_user_ms, cpu_system_ms = excluded.cpu_system_ms, peak_memory_bytes = excluded.peak_memory_bytes,
      io_read_bytes = excluded.io_read_bytes, io_write_bytes = excluded.io_write_bytes, oom_kills = excluded.oom_kills, running = false
    where build_resource_samples.running`;
}

/** Running builds' readings so far (heartbeats): each replaces the attempt's running row, never a final one. */
export async function recordBuildReadings(sql: Sql, readings: readonly (BuildSample & { resources: BuildResources })[], now: Date): Promise<void> {
  for (const sample of readings) {
    const r = sample.resources;
    await sql`
      insert into build_resource_samples (derivation_build_id, attempt, recorded_at, worker_id, wall_ms, cpu_user_ms, cpu_system_ms,
        peak_memory_bytes, io_read_bytes, io_write_bytes, oom_kills, running)
      values (${sample.derivationBuildId}, ${sample.attempt}, ${now}, ${sample.workerId}, ${sample.wallMs}, ${ms(r.cpuUserSeconds)}, ${ms(r.cpuSystemSeconds)},
        ${r.peakMemoryBytes}, ${r.ioReadBytes}, ${r.ioWriteBytes}, ${r.oomKills}, true)
      on conflict (derivation_build_id, attempt) do update set recorded_at = excluded.recorded_at, wall_ms = excluded.wall_ms,
        cpu_user_ms = excluded.cpu_user_ms, cpu_system_ms = excluded.cpu_system_ms, peak_memory_bytes = excluded.peak_memory_bytes,
        io_read_bytes = excluded.io_read_bytes, io_write_bytes = excluded.io_write_bytes, oom_kills = excluded.oom_kills
      where build_resource_samples.running`;
  }
}

/**
 * An attempt that ended without a result (its worker lost, the job refused or cancelled): its
 * running reading stays as the last counters seen, no longer marked running.
 */
export async function endRunningReading(sql: Sql, derivationBuildId: string, attempt: number): Promise<void> {
  await sql`update build_resource_samples set running = false where derivation_build_id = ${derivationBuildId} and attempt = ${attempt} and running`;
}

function flakeGraphView(graph: FlakeGraph): NonNullable<NonNullable<EvaluationStatsView['evaluator']>['flake_graph']> {
  return {
    root: graph.root, truncated: graph.truncated, edges: graph.edges,
    nodes: graph.nodes.map((n) => ({ id: n.id, type: n.type, source: n.source, rev: n.rev, last_modified: n.lastModified })),
  };
}

export async function recordEvaluationStats(sql: Sql, evaluationId: string, durationMs: number, stats: EvalStats | undefined): Promise<void> {
  const evaluator: EvaluationStatsView['evaluator'] = stats === undefined ? null : {
    runs: stats.runs, cpu_seconds: stats.cpuSeconds, thunks: stats.thunks, function_calls: stats.functionCalls, primop_calls: stats.primOpCalls,
    values: stats.values, lookups: stats.lookups, allocated_bytes: stats.allocatedBytes, peak_heap_bytes: stats.peakHeapBytes,
    ...(stats.hotspots ? { hotspots: { functions: stats.hotspots.functions, primops: stats.hotspots.primOps } } : {}),
    ...(stats.flakeGraph ? { flake_graph: flakeGraphView(stats.flakeGraph) } : {}),
  };
  await sql`update evaluations set eval_duration_ms = ${durationMs}, eval_stats = ${evaluator === null ? null : sql.json(evaluator)} where id = ${evaluationId}`;
}

interface SampleRow {
  attempt: number;
  wall_ms: string;
  cpu_user_ms: string | null;
  cpu_system_ms: string | null;
  peak_memory_bytes: string | null;
  io_read_bytes: string | null;
  io_write_bytes: string | null;
  oom_kills: number | null;
  running: boolean;
}

const num = (v: string | null): number | null => (v === null ? null : Number(v));

/** The latest attempt's sample of each derivation build. */
export async function latestBuildResources(sql: Sql, derivationBuildIds: readonly string[]): Promise<Map<string, BuildResourcesView>> {
  if (derivationBuildIds.length === 0) return new Map();
  const rows = await sql<(SampleRow & { derivation_build_id: string })[]>`
    select distinct on (s.derivation_build_id) s.derivation_build_id, s.attempt, s.wall_ms, s.cpu_user_ms, s.cpu_system_ms, s.peak_memory_bytes,
      s.io_read_bytes, s.io_write_bytes, s.oom_kills,
      -- running only while this attempt is the build's current one and still started: an attempt whose worker was lost, or whose
      -- server process died before it could say so, is over whatever its row says
      s.running and db.status = 'started' and db.attempts = s.attempt as running
    from build_resource_samples s join derivation_builds db on db.id = s.derivation_build_id
    where s.derivation_build_id = any(${derivationBuildIds as string[]}::uuid[])
    order by s.derivation_build_id, s.attempt desc`;
  return new Map(rows.map((r) => [r.derivation_build_id, {
    attempt: r.attempt, running: r.running, wall_seconds: Number(r.wall_ms) / 1000,
    cpu_user_seconds: r.cpu_user_ms === null ? null : Number(r.cpu_user_ms) / 1000,
    cpu_system_seconds: r.cpu_system_ms === null ? null : Number(r.cpu_system_ms) / 1000,
    peak_memory_bytes: num(r.peak_memory_bytes), io_read_bytes: num(r.io_read_bytes), io_write_bytes: num(r.io_write_bytes), oom_kills: r.oom_kills,
  }]));
}

export function evaluationStatsView(row: { eval_duration_ms: string | null; eval_stats: EvaluationStatsView['evaluator'] }): EvaluationStatsView {
  return { wall_seconds: row.eval_duration_ms === null ? null : Number(row.eval_duration_ms) / 1000, evaluator: row.eval_stats };
}

/** Deletes samples recorded more than `retentionDays` before `now`, in slices; how many. 0 keeps everything. */
export async function deleteOldBuildSamples(sql: Sql, retentionDays: number, now: Date): Promise<number> {
  const before = retentionCutoff(retentionDays, now);
  if (before === null) return 0;
  return deleteInSlices(async (limit) => (await sql`
    delete from build_resource_samples where ctid in (select ctid from build_resource_samples where recorded_at < ${before} limit ${limit})
    returning 1`).length);
}
