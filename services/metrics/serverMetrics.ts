// The series read at scrape time (docs/metrics.md): what PostgreSQL holds (open evaluations and
// builds, the queue, cache storage, the webhook backlog) and what this process holds in memory
// (connected workers, the CPU pool, the hot cache). Each query reads an index made for it
// (0029_metrics_indexes.sql). No scrape waits for PostgreSQL but the first: a scrape answers from
// the last read and, when that is older than its period (10 s for counts, a minute for cache
// storage, which sums every path), starts the next read in the background.
import type { Sql } from 'postgres';
import type { CpuPool, KilnMetrics, NarStorage, Sample } from '../../storage/index.js';
import { cacheStorageTotals, topWithOther } from '../../storage/index.js';
import type { WorkerConnections } from '../workers/index.js';

export interface ServerMetricsDeps {
  metrics: KilnMetrics;
  sql: Sql;
  /** the process's pools by name (database.web.*, database.cache.*, database.*): each probed for its wait */
  pools: Readonly<Record<string, Sql>>;
  workers: Pick<WorkerConnections, 'connected'>;
  nars: Pick<NarStorage, 'hotCacheStats'>;
  cpu: Pick<CpuPool, 'stats'>;
  /** the UploadBudget's permits now: granted (uploads in progress) and waiting */
  uploads?: () => { granted: number; waiting: number };
  /** metrics.labelTopn: caches with their own storage series, the rest summed as "other" */
  labelTopn: number;
  now?: () => number;
}

/**
 * One read shared by the collectors of one scrape: prom-client calls them in one synchronous pass,
 * so the value is kept until the event loop's next turn.
 */
function perScrape<T>(read: () => T): () => T {
  let kept: { value: T } | null = null;
  return () => {
    if (kept === null) {
      kept = { value: read() };
      setImmediate(() => (kept = null));
    }
    return kept.value;
  };
}

/** Sums over every cached path: read at most once a minute, whatever the scrape interval. */
const STORAGE_MEMO_MS = 60_000;
/** Counts of open evaluations, builds and deliveries: at most every 10 s. */
const COUNTS_MEMO_MS = 10_000;
/** A pool's wait is probed at most every 5 s. */
const POOL_PROBE_MS = 5_000;

/**
 * How long a query waits for a connection of `sql` now: the time to reserve one (released at once).
 * postgres.js counts no waits of its own, so the probe is a query's view of the pool: well under a
 * millisecond when a connection is idle, the time until one frees up when every one is busy.
 */
async function poolWait(sql: Sql): Promise<number> {
  const started = performance.now();
  const reserved = await sql.reserve();
  const waited = (performance.now() - started) / 1000;
  reserved.release();
  return waited;
}

/**
 * `read` at most once per `periodMs`: the first call waits for it; later calls answer the last value
 * at once and, when it is older than the period, start one read in the background. A failed
 * background read keeps the last value and is tried again at the next call.
 */
function readInBackground<T>(periodMs: number, now: () => number, read: () => Promise<T>): () => Promise<T> {
  let last: { at: number; value: T } | null = null;
  let pending: Promise<T> | null = null;
  const refresh = (): Promise<T> => {
    pending ??= read().then((value) => {
      last = { at: now(), value };
      return value;
    }).finally(() => (pending = null));
    return pending;
  };
  return async () => {
    if (last === null) return refresh();
    if (now() - last.at >= periodMs) refresh().catch(() => undefined);
    return last.value;
  };
}

interface CacheStorageRow {
  label: string;
  bytes: number;
  paths: number;
}

export function registerServerMetrics(deps: ServerMetricsDeps): void {
  const { metrics, sql } = deps;
  if (!metrics.enabled) return;
  const now = deps.now ?? Date.now;

  const counted = <T>(read: () => Promise<T>) => readInBackground(COUNTS_MEMO_MS, now, read);
  const evaluations = counted(async () => {
    const rows = await sql<{ phase: string; n: number }[]>`
      select phase, count(*)::int as n from evaluations where phase not in ('completed', 'failed', 'aborted') group by phase`;
    return rows.map((r) => ({ labels: { phase: r.phase }, value: r.n }));
  });
  metrics.scraped('kiln_evaluations', 'evaluations in each open phase (completed, failed and aborted ones are not counted)', ['phase'], evaluations);
  const builds = counted(async () => {
    const rows = await sql<{ status: string; n: number }[]>`
      select status, count(*)::int as n from derivation_builds where status in ('queued', 'started') group by status`;
    const counts = new Map(rows.map((r) => [r.status, r.n]));
    return ['queued', 'started'].map((status) => ({ labels: { status }, value: counts.get(status) ?? 0 }));
  });
  metrics.scraped('kiln_builds', 'derivation builds queued or started (ended builds: kiln_build_duration_seconds_count)', ['status'], builds);
  const queue = counted(async () => {
    const [row] = await sql<{ builds: number; evaluations: number }[]>`
      select (select count(*)::int from derivation_builds where status = 'queued') as builds,
             (select count(*)::int from evaluations where phase = 'queued') as evaluations`;
    return [{ labels: { kind: 'build' }, value: row?.builds ?? 0 }, { labels: { kind: 'evaluation' }, value: row?.evaluations ?? 0 }];
  });
  metrics.scraped('kiln_queue_depth', 'jobs waiting for a worker: queued builds and queued evaluations', ['kind'], queue);
  const backlog = counted(async () => {
    const rows = await sql<{ status: string; n: number }[]>`
      select status, count(*)::int as n from event_deliveries where status in ('pending', 'attempting', 'retrying') group by status`;
    const counts = new Map(rows.map((r) => [r.status, r.n]));
    return ['pending', 'attempting', 'retrying'].map((status) => ({ labels: { status }, value: counts.get(status) ?? 0 }));
  });
  metrics.scraped('kiln_webhook_backlog', 'webhook and task action deliveries not finished yet, by status', ['status'], backlog);

  const pools = Object.entries(deps.pools).map(([pool, poolSql]) => ({ pool, wait: readInBackground(POOL_PROBE_MS, now, () => poolWait(poolSql)) }));
  metrics.scraped('kiln_postgres_pool_wait_seconds', 'seconds the last probe of each PostgreSQL pool waited for a connection (probed at most every 5 s, in the background)', ['pool'], async () =>
    Promise.all(pools.map(async (p) => ({ labels: { pool: p.pool }, value: await p.wait() }))));

  const cacheStorage = readInBackground(STORAGE_MEMO_MS, now, async (): Promise<CacheStorageRow[]> => topWithOther(
    (await cacheStorageTotals(sql)).map((r) => ({ label: r.name, bytes: r.bytes, paths: r.paths })), deps.labelTopn, (r) => r.bytes,
    (rest) => ({ bytes: rest.reduce((n, r) => n + r.bytes, 0), paths: rest.reduce((n, r) => n + r.paths, 0) }),
  ));
  metrics.scraped('kiln_cache_storage_bytes', 'stored (compressed) NAR bytes per cache, read at most once a minute', ['cache'], async () =>
    (await cacheStorage()).map((r) => ({ labels: { cache: r.label }, value: r.bytes })));
  metrics.scraped('kiln_cache_paths', 'store paths per cache, read at most once a minute', ['cache'], async () =>
    (await cacheStorage()).map((r) => ({ labels: { cache: r.label }, value: r.paths })));

  metrics.scraped('kiln_workers_connected', 'workers connected to this server process over /proto', [], () => [{ labels: {}, value: deps.workers.connected().length }]);
  metrics.scraped('kiln_worker_slots', 'build and evaluation slots of the workers connected to this process: total, and busy as their last heartbeat said', ['kind', 'state'], () => {
    const totals = { build: { total: 0, busy: 0 }, eval: { total: 0, busy: 0 } };
    for (const w of deps.workers.connected()) {
      totals.build.total += w.hello.maxConcurrentBuilds;
      totals.eval.total += w.hello.maxConcurrentEvals;
      totals.build.busy += w.load?.runningBuilds ?? 0;
      totals.eval.busy += w.load?.runningEvals ?? 0;
    }
    const samples: Sample<'kind' | 'state'>[] = [];
    for (const [kind, t] of Object.entries(totals)) {
      samples.push({ labels: { kind, state: 'total' }, value: t.total }, { labels: { kind, state: 'busy' }, value: t.busy });
    }
    return samples;
  });
  metrics.scraped('kiln_worker_heartbeat_age_seconds', 'seconds since the quietest connected worker was last heard from (0 with no worker)', [], () => {
    const oldest = Math.min(...deps.workers.connected().map((w) => w.lastSeen), now());
    return [{ labels: {}, value: Math.max(0, (now() - oldest) / 1000) }];
  });

  const cpuStats = perScrape(() => deps.cpu.stats());
  metrics.scraped('kiln_cpu_pool_queued_tasks', 'CPU-bound tasks (hashing, compression) waiting for a thread', [], () => [{ labels: {}, value: cpuStats().queued }]);
  metrics.scraped('kiln_cpu_pool_threads', 'threads of the CPU pool', [], () => [{ labels: {}, value: cpuStats().threads }]);
  metrics.scraped('kiln_cpu_pool_tasks_completed_total', 'CPU pool tasks completed since the start', [], () => [{ labels: {}, value: cpuStats().completed }]);
  metrics.scraped('kiln_cpu_pool_task_seconds', 'CPU pool task time since the start: how long tasks ran and waited for a thread, median and 99th percentile', ['stage', 'quantile'], () => {
    const { runMs, waitMs } = cpuStats();
    // piscina answers NaN before its first task: no task, no time.
    const s = (ms: number) => (Number.isFinite(ms) ? ms / 1000 : 0);
    return [
      { labels: { stage: 'run', quantile: '0.5' }, value: s(runMs.p50) }, { labels: { stage: 'run', quantile: '0.99' }, value: s(runMs.p99) },
      { labels: { stage: 'wait', quantile: '0.5' }, value: s(waitMs.p50) }, { labels: { stage: 'wait', quantile: '0.99' }, value: s(waitMs.p99) },
    ];
  });
  metrics.scraped('kiln_cpu_pool_utilization_ratio', 'share of the CPU pool\'s capacity used since the start, 0 to 1', [], () => [{ labels: {}, value: cpuStats().utilization }]);

  const uploads = deps.uploads;
  if (uploads) {
    metrics.scraped('kiln_upload_permits', 'upload permits of this process (upload.concurrency, upload.bytesBudget): granted (uploads being stored) and waiting', ['state'], () => {
      const now = uploads();
      return [{ labels: { state: 'granted' }, value: now.granted }, { labels: { state: 'waiting' }, value: now.waiting }];
    });
  }

  metrics.scraped('kiln_hot_cache_bytes', 'bytes held by the in-memory narinfo and small NAR cache (nar.hotCacheBytes)', [], () => [{ labels: {}, value: deps.nars.hotCacheStats().bytes }]);
  metrics.scraped('kiln_hot_cache_entries', 'entries of the in-memory narinfo and small NAR cache', [], () => [{ labels: {}, value: deps.nars.hotCacheStats().entries }]);
  metrics.scraped('kiln_hot_cache_lookups_total', 'lookups of the in-memory cache since the start, by result; the hit ratio is hit / (hit + miss)', ['result'], () => {
    const stats = deps.nars.hotCacheStats();
    return [{ labels: { result: 'hit' }, value: stats.hits }, { labels: { result: 'miss' }, value: stats.misses }];
  });
}
