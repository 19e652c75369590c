// The collector of a server process (docs/gc.md, "Passes"): every few seconds it tries the
// collector's advisory lock (one holder per database; another process takes over as soon as the
// holder's session ends, kill -9 included) and, holding it, starts what is due: a requested run, a
// pass gc.intervalSecs after the last one ended, a deep round gc.deepIntervalSecs after the last
// one ended (0: only on request). The schedule is read from gc_runs, so it survives restarts.
import { failGcRun, failInterruptedGcRuns, finishGcRun, lastGcRunEnd, pendingGcRequest, startGcRun, trySessionLock, type GcRunKind, type HeldLock } from '../../storage/index.js';
import { runCollectionPass } from './collectionPass.js';
import { runDeepRound } from './deepRound.js';
import type { GcDeps } from './gcDeps.js';

const GC_LOCK = { single: 7_414_102 };
/** How often a process looks for due or requested work (a requested run starts within this). */
const TICK_MS = 5000;

export interface GarbageCollectorOptions {
  /** false: no background loop; runs happen only through tick() (tests) */
  loop?: boolean;
}

export class GarbageCollector {
  private lock: HeldLock | null = null;
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<unknown> = Promise.resolve();
  private stopped = false;
  private readonly since: Date;

  constructor(private readonly deps: GcDeps, private readonly options: GarbageCollectorOptions = {}) {
    this.since = deps.clock.now();
  }

  start(): void {
    if (this.options.loop === false || this.timer !== null) return;
    this.timer = setInterval(() => void this.tick(), TICK_MS);
    this.timer.unref();
  }

  /** A run was requested here: look now rather than at the next tick. */
  wake(): void {
    if (this.options.loop !== false) void this.tick();
  }

  /** One look for due work; ticks never overlap. Resolves with the kinds it ran. */
  tick(): Promise<GcRunKind[]> {
    const run = this.ticking.then(() => this.once());
    this.ticking = run.catch(() => undefined);
    return run.catch((err: unknown) => {
      this.deps.log.error({ err }, 'garbage collection failed; it runs again when next due');
      return [];
    });
  }

  get isLeader(): boolean {
    return this.lock !== null;
  }

  private async once(): Promise<GcRunKind[]> {
    if (this.stopped || !(await this.lead())) return [];
    const ran: GcRunKind[] = [];
    if (await this.runIfDue('pass', this.deps.config['gc.intervalSecs'])) ran.push('pass');
    if (await this.runIfDue('deep', this.deps.config['gc.deepIntervalSecs'])) ran.push('deep');
    return ran;
  }

  private async runIfDue(kind: GcRunKind, intervalSecs: number): Promise<boolean> {
    const { sql, clock } = this.deps;
    const request = await pendingGcRequest(sql, kind);
    if (request === null) {
      if (intervalSecs === 0) return false;
      const last = (await lastGcRunEnd(sql, kind)) ?? this.since;
      if (clock.now().getTime() < last.getTime() + intervalSecs * 1000) return false;
    }
    const id = await startGcRun(sql, kind, request?.id ?? null, clock.now());
    try {
      const result = kind === 'pass' ? await runCollectionPass(this.deps) : await runDeepRound(this.deps, request !== null);
      await finishGcRun(sql, id, clock.now(), { ...result });
      this.deps.log.info({ gc: kind, result }, kind === 'pass' ? 'collection pass finished' : 'deep collection round finished');
    } catch (err) {
      await failGcRun(sql, id, clock.now(), err instanceof Error ? err.message : String(err));
      throw err;
    }
    return true;
  }

  private async lead(): Promise<boolean> {
    if (this.lock) return true;
    this.lock = await trySessionLock(this.deps.sql, GC_LOCK);
    if (!this.lock) return false;
    // Whatever is still 'running' belonged to a holder that died: the lock was free.
    const interrupted = await failInterruptedGcRuns(this.deps.sql, this.deps.clock.now());
    if (interrupted > 0) this.deps.log.warn({ runs: interrupted }, 'a collection run was interrupted by the end of its process; the next run finishes the job');
    return true;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.ticking;
    const lock = this.lock;
    this.lock = null;
    await lock?.release();
  }
}
