// The server's credit for an evaluation's evalBatch messages (docs/proto.md, "Evaluation batches"):
// EVAL_BATCH_WINDOW at the start, one more for each evalCredit. An evaluation waits for credit
// before each batch, so a server recording slowly holds few of them, however large the graph.
import { EVAL_BATCH_WINDOW } from '../protocol/index.js';

export class BatchCredit {
  private credit = EVAL_BATCH_WINDOW;
  private waiting: (() => void) | null = null;

  grant(batches: number): void {
    this.credit += batches;
    const wake = this.waiting;
    this.waiting = null;
    wake?.();
  }

  /** Resolves when a batch may be sent (and counts it); rejects when `signal` aborts first. */
  async take(signal: AbortSignal): Promise<void> {
    while (this.credit === 0) {
      signal.throwIfAborted();
      await new Promise<void>((resolve, reject) => {
        const aborted = () => reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
        signal.addEventListener('abort', aborted, { once: true });
        this.waiting = () => {
          signal.removeEventListener('abort', aborted);
          resolve();
        };
      });
    }
    this.credit -= 1;
  }
}
