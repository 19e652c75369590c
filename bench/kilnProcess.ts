// kiln in a process of its own for the /proto benches, so its RSS and CPU are its own and the
// simulated workers do not share its event loop. Started with fork(); the options come as JSON in
// argv[2]. It makes an organization, a project subscribed to a writable cache and, when asked, a
// worker registration, then reports them to the parent and runs until the parent sends 'stop'.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { startBenchKiln } from './benchKiln.js';
import { fullGc } from './childServer.js';
import { formatCounts } from './statementCounter.js';
import type { OptionPath } from '../config/index.js';

export interface KilnProcessOptions {
  overrides: Partial<Record<OptionPath, unknown>>;
  /** register a peer token any worker may present (POST /projects/{project}/workers) */
  registerToken: boolean;
}

export interface KilnProcessReady {
  url: string;
  databaseUrl: string;
  userToken: string;
  projectId: string;
  /** the peer token, when registerToken */
  peerToken: string | null;
}

const opts = JSON.parse(process.argv[2] ?? '{}') as KilnProcessOptions;
// The benches share one PostgreSQL (max_connections 100) with other work: modest pools, which
// bench/README.md states with the figures.
const bench = await startBenchKiln({
  'database.minConnections': 0, 'database.web.minConnections': 0, 'database.cache.minConnections': 0,
  'database.maxConnections': 8, 'database.web.maxConnections': 4, 'database.cache.maxConnections': 2,
  // The bench project's repository is a local path no worker ever clones.
  'projects.allowLocalRepositories': true,
  ...opts.overrides,
});
// A parent that died (a failed bench) must not leave this server and its database behind.
process.once('disconnect', () => {
  setTimeout(() => process.exit(1), 5000).unref();
  void bench.stop().finally(() => process.exit(1));
});
const api = async (method: string, path: string, body?: unknown): Promise<unknown> => {
  const res = await fetch(`${bench.kiln.url}/api/v1${path}`, {
    method, headers: { 'content-type': 'application/json', authorization: `Bearer ${bench.token}` }, body: body === undefined ? null : JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { message: unknown }).message;
};
await api('PUT', '/orgs', { name: 'bench' });
await api('PUT', '/projects/bench', { name: 'app', repository: 'file:///nonexistent', wildcard: 'packages.x86_64-linux.*' });
const [project] = await bench.sql<{ id: string }[]>`select id from projects where name = 'app'`;
await bench.createCache('main');
await bench.sql`insert into subscriptions (project_id, cache_id, mode) select ${project!.id}, id, 0 from caches where name = 'main'`;
const peerToken = opts.registerToken ? ((await api('POST', `/projects/${project!.id}/workers`, { name: 'bench' })) as { token: string }).token : null;
const [db] = await bench.sql<{ db: string }[]>`select current_database() as db`;
const ready: KilnProcessReady = {
  url: bench.kiln.url, databaseUrl: `postgres://postgres@127.0.0.1:5432/${db!.db}`, userToken: bench.token, projectId: project!.id, peerToken,
};
// the time between samples, the 10 ms interval included: the lateness is what exceeds it (as the serving threads report it)
const LOOP_SAMPLE_MS = 10;
const loopDelay = monitorEventLoopDelay({ resolution: LOOP_SAMPLE_MS });
loopDelay.enable();
process.send!(ready);
let cpuFrom = process.cpuUsage();
process.on('message', (message) => {
  // the serving threads' counters (requests, fromMemory, forwarded, …), summed
  if (message === 'threads') {
    const node = bench.kiln.root.inspect().children.find((c) => c.id === 'http-threads');
    const sum: Record<string, number> = {};
    for (const child of node !== undefined && 'children' in node ? node.children : []) {
      for (const [k, v] of Object.entries(('summary' in child ? child.summary : undefined) ?? {})) {
        // a loop delay is the worst thread's; everything else adds up
        if (typeof v === 'number') sum[k] = k.startsWith('loopDelay') ? Math.max(sum[k] ?? 0, v) : (sum[k] ?? 0) + v;
      }
    }
    process.send!(sum);
    return;
  }
  // the main thread's isolate (the serving threads' are in their counters: heapBytes, externalBytes)
  if (message === 'memory') {
    process.send!(process.memoryUsage());
    return;
  }
  // the main thread's event-loop delay since the last ask (the threads' are in their counters)
  if (message === 'loop') {
    process.send!({ p99Ms: Math.max(0, loopDelay.percentile(99) / 1e6 - LOOP_SAMPLE_MS), maxMs: Math.max(0, loopDelay.max / 1e6 - LOOP_SAMPLE_MS) });
    loopDelay.reset();
    return;
  }
  if (message === 'gc') {
    process.send!(fullGc());
    return;
  }
  // the server process's CPU time (all its threads): 'cpu-reset' starts a window, 'cpu' reports its user + system ms
  if (message === 'cpu-reset') {
    cpuFrom = process.cpuUsage();
    process.send!('reset');
    return;
  }
  if (message === 'cpu') {
    const used = process.cpuUsage(cpuFrom);
    process.send!((used.user + used.system) / 1000);
    return;
  }
  // BENCH_COUNT_STATEMENTS: 'statements-reset' starts a window, 'statements:<builds>' reports it
  if (message === 'statements-reset') {
    bench.statements?.reset();
    process.send!('reset');
    return;
  }
  if (typeof message === 'string' && message.startsWith('statements:')) {
    const counts = bench.statements?.counts();
    process.send!(counts ? formatCounts(counts, Number(message.slice('statements:'.length))) : []);
    return;
  }
  if (message !== 'stop') return;
  void bench.stop().finally(() => process.exit(0));
});
