// worker.system.cpuCoreScore null: the worker measures its core's speed at start, so the scheduler's
// resource-aware ranking (services/workers/workerRanking.ts) can prefer a faster core. The work is
// a native sort of 2^18 pseudo-random 32-bit integers, branchy and memory-bound like a compiler's
// and unlike a hash that a CPU extension speeds up; the fastest of a few rounds is kept, so a busy
// machine at start costs rounds, not accuracy. 1,000 is a core that sorts them in 16 ms; twice as fast
// scores 2,000.

const VALUES = 1 << 18;
const REFERENCE_MS = 16;
const ROUNDS = 7;

export interface CpuCoreScoreOptions {
  /** milliseconds, monotonic (performance.now); tests pass their own */
  now?: () => number;
  rounds?: number;
}

export function measureCpuCoreScore(options: CpuCoreScoreOptions = {}): number {
  const now = options.now ?? (() => performance.now());
  const source = new Int32Array(VALUES);
  let x = 2_463_534_242;
  for (let i = 0; i < VALUES; i++) {
    x ^= x << 13; x ^= x >>> 17; x ^= x << 5;
    source[i] = x | 0;
  }
  const work = new Int32Array(VALUES);
  let fastest = Infinity;
  for (let round = 0; round < (options.rounds ?? ROUNDS); round++) {
    work.set(source);
    const started = now();
    work.sort();
    fastest = Math.min(fastest, now() - started);
  }
  return Math.max(1, Math.round((REFERENCE_MS / Math.max(fastest, 1e-3)) * 1000));
}
