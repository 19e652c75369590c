// The evaluation pool (worker.eval.forkWorkers, worker.system.minFreeRamMb, worker.eval.maxRss):
// at most `size` evaluation subprocesses at once, each a pure `nix eval` of one call (a chunk of
// the attribute tree), that ends with its call. Nix 2.8 has no evaluator that stays pure and takes
// call after call: `nix repl` turns pure evaluation off whatever it is told, and restricted mode
// still fetches a `path:` tree of the worker's files (docs/worker.md, "The evaluation pool"). So no
// subprocess is ever idle, above maxRss or not: the restart maxRss asks for is every call's end.
// What guards the host during a call is a watch on available memory: below the margin, the pool
// kills one running subprocess, the largest (large enough to restore the margin whenever any one
// is), and its call fails with that reason, which the caller narrows down to the attribute that
// needed the memory.
import type { MemoryProbe } from './memoryProbe.js';

export interface EvalPoolOptions {
  size: number;
  minFreeBytes: number;
  memory: MemoryProbe;
  /** how often available memory is read while a call runs */
  watchIntervalMs?: number;
  /** a subprocess was killed for memory, in words (evaluation.activity) */
  onMemoryKill?: (message: string) => void;
}

/** Starts one call's subprocess; `onStart` hears its pid (the leader of its process group). */
export type StartCall<T> = (onStart: (pid: number) => void) => Promise<T>;

export type PoolResult<T> = { killedForMemory: false; result: T } | { killedForMemory: true; message: string };

const MIB = 1024 * 1024;
const mib = (bytes: number) => `${Math.round(bytes / MIB)} MiB`;
const DEFAULT_WATCH_MS = 100;

interface Running {
  pid: number | null;
  killReason: string | null;
}

export class EvalPool {
  private readonly running = new Set<Running>();
  private readonly waiting: (() => void)[] = [];
  private active = 0;
  private watch: NodeJS.Timeout | null = null;
  /** the kill whose memory is not back yet: the next reading waits for it */
  private killing: Running | null = null;
  memoryKills = 0;
  /** the largest resident size of one subprocess the watch saw */
  peakRssBytes = 0;
  /** subprocesses started */
  calls = 0;

  constructor(private readonly options: EvalPoolOptions) {
    if (!Number.isInteger(options.size) || options.size < 1) throw new Error(`the evaluation pool needs at least one subprocess, got ${options.size}`);
  }

  /** The pids of the subprocesses running now. */
  pids(): number[] {
    return [...this.running].flatMap((r) => (r.pid === null ? [] : [r.pid]));
  }

  /** Runs one call once fewer than `size` run. */
  async run<T>(start: StartCall<T>): Promise<PoolResult<T>> {
    if (this.active < this.options.size) this.active++;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    const entry: Running = { pid: null, killReason: null };
    this.running.add(entry);
    this.watch ??= setInterval(() => this.checkMemory(), this.options.watchIntervalMs ?? DEFAULT_WATCH_MS);
    this.calls++;
    try {
      const result = await start((pid) => {
        entry.pid = pid;
      });
      return entry.killReason === null ? { killedForMemory: false, result } : { killedForMemory: true, message: entry.killReason };
    } finally {
      this.running.delete(entry);
      if (this.killing === entry) this.killing = null;
      const next = this.waiting.shift();
      if (next) next();
      else this.active--;
      if (this.running.size === 0 && this.watch) {
        clearInterval(this.watch);
        this.watch = null;
      }
    }
  }

  private checkMemory(): void {
    const sizes = [...this.running].flatMap((entry) => {
      const rss = entry.pid === null || entry.killReason !== null ? null : this.options.memory.rssBytes(entry.pid);
      return rss === null ? [] : [{ entry, pid: entry.pid!, rss }];
    });
    for (const { rss } of sizes) this.peakRssBytes = Math.max(this.peakRssBytes, rss);
    if (this.killing || sizes.length === 0) return;
    const available = this.options.memory.availableBytes();
    if (available >= this.options.minFreeBytes) return;
    const deficit = this.options.minFreeBytes - available;
    // The largest: it covers the shortfall whenever any one does, and it is the one growing. The
    // smallest that covers it was tried first; the bench showed it killing small calls beside a
    // growing one that then crossed the margin again (docs/worker.md, "The evaluation pool").
    const victim = sizes.reduce((a, b) => (b.rss > a.rss ? b : a));
    const covers = victim.rss >= deficit;
    const message = `its evaluation subprocess, holding ${mib(victim.rss)}, was killed: the host had ${mib(available)} of memory available, below worker.system.minFreeRamMb (${mib(this.options.minFreeBytes)})${covers ? '' : ', and no one subprocess held the shortfall'}`;
    victim.entry.killReason = message;
    this.killing = victim.entry;
    this.memoryKills++;
    try {
      process.kill(-victim.pid, 'SIGKILL');
    } catch {
      // it ended on its own meanwhile
    }
    this.options.onMemoryKill?.(message);
  }
}
