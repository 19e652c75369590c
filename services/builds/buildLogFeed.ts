// Wakes the readers of live build logs (POST /builds/{id}/log). In the process that receives a
// build's log over /proto, BuildLogs calls notify() on every append and every stored chunk. From
// other processes, build.* events on the bus (status changes) wake them, and a reader polls the
// database at least every `pollMs`, so a log written by another process arrives within a second.
import type { EventBus } from '../../storage/index.js';

export const LIVE_LOG_POLL_MS = 1000;

interface Waiter {
  wake(): void;
}

export class BuildLogFeed {
  private readonly waiters = new Map<string, Set<Waiter>>();
  private closed = false;
  private unsubscribe: (() => void) | undefined;

  constructor(private readonly pollMs = LIVE_LOG_POLL_MS) {}

  /** Wakes readers on the build.* events of their derivation build, from any process. */
  listen(bus: EventBus): void {
    this.unsubscribe = bus.subscribe((event) => {
      if (this.waiters.size === 0 || !event.event.startsWith('build.')) return;
      const id = derivationBuildOf(event.frame);
      if (id) this.notify(id);
    });
  }

  /** Something changed in the log or the status of a derivation build. */
  notify(derivationBuildId: string): void {
    const set = this.waiters.get(derivationBuildId);
    if (!set) return;
    this.waiters.delete(derivationBuildId);
    for (const w of set) w.wake();
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /**
   * A promise that settles at the next notify() for the build, after pollMs at the latest, or when
   * the feed closes. Taken before reading, so a change between the read and the wait is not lost.
   */
  next(derivationBuildId: string): { settled: Promise<void>; cancel(): void } {
    let timer: NodeJS.Timeout | undefined;
    let waiter!: Waiter;
    const settled = new Promise<void>((resolve) => {
      waiter = {
        wake: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      if (this.closed) return resolve();
      timer = setTimeout(() => this.drop(derivationBuildId, waiter, true), this.pollMs);
      let set = this.waiters.get(derivationBuildId);
      if (!set) this.waiters.set(derivationBuildId, (set = new Set()));
      set.add(waiter);
    });
    return { settled, cancel: () => this.drop(derivationBuildId, waiter, true) };
  }

  /** Ends every live log stream (server shutdown). */
  close(): void {
    this.closed = true;
    this.unsubscribe?.();
    for (const set of this.waiters.values()) for (const w of set) w.wake();
    this.waiters.clear();
  }

  private drop(derivationBuildId: string, waiter: Waiter, wake: boolean): void {
    const set = this.waiters.get(derivationBuildId);
    set?.delete(waiter);
    if (set?.size === 0) this.waiters.delete(derivationBuildId);
    if (wake) waiter.wake();
  }
}

/** The derivation_build of a build.* event's envelope, without trusting its shape. */
function derivationBuildOf(frame: string): string | null {
  try {
    const parsed: unknown = JSON.parse(frame);
    if (typeof parsed !== 'object' || parsed === null || !('content' in parsed)) return null;
    const content: unknown = parsed.content;
    if (typeof content !== 'object' || content === null || !('derivation_build' in content)) return null;
    return typeof content.derivation_build === 'string' ? content.derivation_build : null;
  } catch {
    return null;
  }
}
