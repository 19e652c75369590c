// A pass that runs on demand, never two at once: wakes during a pass coalesce into one more pass
// after it, so a burst of changes costs at most two passes, and none is missed.
import { describeError } from './escalation.js';
import type { WatchedState } from './watched.js';

/** What GET /api/v1/admin/actors shows as the loop's state value. */
export type LoopState = 'idle' | 'running' | 'running-with-another-pass-pending' | 'stopped';

export class CoalescingLoop {
  private running = false;
  private again = false;
  private stopped = false;
  private passes = 0;
  private lastError: string | undefined;
  /** the passes under way: the one running and those woken while it runs */
  private current: Promise<void> = Promise.resolve();

  constructor(
    private readonly pass: () => Promise<void>,
    /** a failed pass; the loop goes on with the next wake */
    private readonly onError: (error: unknown) => void,
  ) {}

  /** Runs a pass now, or once more after the one running (however many wakes arrive meanwhile). */
  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    // Set before the pass starts, so that a wake from its synchronous part does not start a second one.
    this.running = true;
    this.current = this.runPasses();
  }

  /** Resolves once the passes woken before this call have ended. */
  settle(): Promise<void> {
    return this.current;
  }

  /** No pass starts after this; resolves once the one running has ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.current;
  }

  /** For the supervision tree: the state, the passes run and the last failure (Supervisor.watch). */
  inspect(): WatchedState {
    const state: LoopState = this.stopped ? 'stopped'
      : this.running ? (this.again ? 'running-with-another-pass-pending' : 'running') : 'idle';
    return {
      state,
      status: this.stopped ? 'stopped' : 'running',
      mailbox: this.again && !this.stopped ? 1 : 0,
      summary: { passes: this.passes },
      ...(this.lastError !== undefined ? { error: this.lastError } : {}),
    };
  }

  private async runPasses(): Promise<void> {
    try {
      do {
        this.again = false;
        try {
          await this.pass();
        } catch (error: unknown) {
          this.lastError = describeError(error);
          this.onError(error);
        }
        this.passes += 1;
      } while (this.again && !this.stopped);
    } finally {
      this.running = false;
    }
  }
}
