// The server's pool of worker threads for CPU-bound work (DESIGN.md: SHA-256, zstd, NAR parsing),
// so the event loop keeps serving while a large NAR is hashed. The tasks are in cpuWorker.ts.
import { availableParallelism } from 'node:os';
import { Piscina } from 'piscina';
import { threadExecArgv } from './threadExecArgv.js';
import type { CpuTaskInput, CpuTaskMessage, CpuTaskName, CpuTaskOutput } from './cpuWorker.js';

export interface CpuPoolOptions {
  /** Worker threads at most; default one per core. */
  maxThreads?: number;
  /** How long a thread stays after its last task; default 5 minutes. */
  idleThreadMs?: number;
}

export interface CpuPoolStats {
  threads: number;
  queued: number;
  completed: number;
  /** Share of the pool's capacity used since it started, 0 to 1. */
  utilization: number;
  /** milliseconds tasks ran and waited for a thread since the start: median and 99th percentile (piscina's timing histograms) */
  runMs: { p50: number; p99: number };
  waitMs: { p50: number; p99: number };
}

export interface CpuPool {
  run<K extends CpuTaskName>(task: K, input: CpuTaskInput<K>, options?: { signal?: AbortSignal }): Promise<CpuTaskOutput<K>>;
  stats(): CpuPoolStats;
  /**
   * Shuts the pool down: tasks still queued reject, tasks already running finish, then the threads
   * exit. Later runs reject. Safe to call twice.
   */
  destroy(): Promise<void>;
}

const IDLE_THREAD_MS = 5 * 60_000;

export function createCpuPool(options: CpuPoolOptions = {}): CpuPool {
  const maxThreads = options.maxThreads ?? availableParallelism();
  if (!Number.isSafeInteger(maxThreads) || maxThreads < 1) {
    throw new RangeError(`createCpuPool maxThreads: expected an integer >= 1, got ${String(maxThreads)}`);
  }
  const piscina = new Piscina<CpuTaskMessage, unknown>({
    filename: new URL('./cpuWorker.ts', import.meta.url).href,
    maxThreads,
    // piscina starts minThreads at once; a thread (tsx and the task modules) costs ~0.5 s of CPU,
    // which a server that never ingests, and every test server, would pay for nothing. So the
    // pool starts empty, and the threads kept are made by tasks.
    minThreads: 0,
    // piscina's default of 0 ends every thread above minThreads the moment it is idle, and a new
    // one loads tsx and the task modules again (about a second on a busy machine): an ingest
    // that ran two tasks at once paid that every time.
    idleTimeout: options.idleThreadMs ?? IDLE_THREAD_MS,
    execArgv: threadExecArgv(),
  });
  // close() reports a timeout (running tasks that outlive closeTimeout) as an 'error' event and
  // then terminates the threads anyway; without a listener that event would crash the process.
  piscina.on('error', () => {});
  let closing: Promise<void> | undefined;

  return {
    async run(task, input, runOptions = {}) {
      if (closing) throw new Error(`the CPU pool has been destroyed; cannot run ${task}`);
      const message: CpuTaskMessage = { task, input };
      return (await piscina.run(message, { signal: runOptions.signal ?? null })) as CpuTaskOutput<typeof task>;
    },
    stats: () => {
      // Each of piscina's summaries computes some twenty percentiles at every read: one read each.
      const { runTime, waitTime } = piscina.histogram;
      return {
        threads: piscina.threads.length,
        queued: piscina.queueSize,
        completed: piscina.completed,
        utilization: piscina.utilization,
        runMs: { p50: runTime.p50, p99: runTime.p99 },
        waitMs: { p50: waitTime.p50, p99: waitTime.p99 },
      };
    },
    destroy() {
      closing ??= piscina.close({ force: true });
      return closing;
    },
  };
}
