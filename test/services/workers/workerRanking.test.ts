// scheduler.scoringPolicy: which fitting worker gets a build (services/workers/workerRanking.ts).
import t from 'tap';
import { PROTOCOL_VERSION } from '../../../protocol/index.js';
import { bestWorker } from '../../../services/workers/workerRanking.js';
import type { ConnectedWorker } from '../../../services/index.js';
import { testHello } from '../../support/protoClient.js';

const GiB = 1024 ** 3;
type Load = NonNullable<ConnectedWorker['load']>;
const idle: Load = { runningBuilds: 0, runningEvals: 0, load1: 0, memoryFreeBytes: 8 * GiB, memoryTotalBytes: 16 * GiB, storeFreeBytes: 100 * GiB };

let clock = 0;
function worker(name: string, opts: { slots?: number; load?: Partial<Load> | null; open?: boolean; cpuCoreScore?: number | null } = {}): ConnectedWorker {
  const hello = { v: PROTOCOL_VERSION as typeof PROTOCOL_VERSION, ...testHello({ maxConcurrentBuilds: opts.slots ?? 4, cpuCores: 4, cpuCoreScore: opts.cpuCoreScore ?? null }) };
  return {
    connectionId: name, hello, projects: [], open: opts.open ?? false, address: '127.0.0.1', connectedAt: new Date(clock++), lastSeen: 0,
    load: opts.load === null ? null : { ...idle, ...opts.load }, link: { send: () => undefined, close: () => undefined }, running: { jobs: 0 },
  };
}
const names = (ranked: ConnectedWorker[]) => ranked.map((w) => w.connectionId);
/** The whole order, as placement would give builds one at a time with nothing running: the best, then the best of the rest. */
function rankWorkers(...[policy, fits, build, running]: Parameters<typeof bestWorker>): ConnectedWorker[] {
  const left = [...fits];
  const ranked: ConnectedWorker[] = [];
  for (let best = bestWorker(policy, left, build, running); best; best = bestWorker(policy, left, build, running)) {
    ranked.push(best);
    left.splice(left.indexOf(best), 1);
  }
  return ranked;
}

t.test('simple: the least busy by build slots; ties to the earliest connected', async (t) => {
  const a = worker('a', { slots: 2 });
  const b = worker('b', { slots: 8 });
  const c = worker('c', { slots: 4, load: { load1: 40 } });
  const running = new Map([[a, 1], [b, 1], [c, 0]]);
  t.same(names(rankWorkers('simple', [a, b, c], { preferLocalBuild: false }, (w) => running.get(w)!)), ['c', 'b', 'a'], 'heartbeat load is ignored');
  t.same(names(rankWorkers('simple', [b, a], { preferLocalBuild: true }, () => 0)), ['a', 'b'], 'ties keep connection order; preferLocalBuild ignored');
});

t.test('resource-aware: load, memory, store space, CPU speed and preferLocalBuild count', async (t) => {
  const busyCpu = worker('busy-cpu', { load: { load1: 8 } });
  const lowMemory = worker('low-memory', { load: { memoryFreeBytes: 100 << 20 } });
  const fullStore = worker('full-store', { load: { storeFreeBytes: GiB } });
  const calm = worker('calm');
  t.same(names(rankWorkers('resource-aware', [busyCpu, lowMemory, fullStore, calm], { preferLocalBuild: false }, () => 0)),
    ['calm', 'busy-cpu', 'low-memory', 'full-store']);
  const slow = worker('slow', { cpuCoreScore: 1000 });
  const fast = worker('fast', { cpuCoreScore: 9000 });
  t.same(names(rankWorkers('resource-aware', [slow, fast], { preferLocalBuild: false }, () => 0)), ['fast', 'slow'], 'the faster core wins a tie');
  const local = worker('local', { open: true, load: { load1: 3 } });
  const remote = worker('remote');
  t.same(names(rankWorkers('resource-aware', [remote, local], { preferLocalBuild: false }, () => 0)), ['remote', 'local']);
  t.same(names(rankWorkers('resource-aware', [remote, local], { preferLocalBuild: true }, () => 0)), ['local', 'remote'], 'preferLocalBuild goes to the local worker');
  const unknown = worker('no-heartbeat-yet', { load: null });
  t.same(names(rankWorkers('resource-aware', [unknown, remote], { preferLocalBuild: false }, (w) => (w === remote ? 1 : 0))), ['no-heartbeat-yet', 'remote'], 'no load reported: slots only');
});
