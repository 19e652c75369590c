// The check pass of chunked uploads (parse, NarHash, listing) runs over each chunk as soon as it is
// staged instead of over the whole staged file at finalize, on a thread of its own (checkTasks.ts),
// so it takes nothing from the event loop that receives the chunks. The state lives only in that thread's
// memory: finalize uses it when it covers exactly the staged bytes and otherwise runs the full pass
// over the staged file (after a restart, an evicted state, a chunk that failed midway, bytes that
// are not a NAR: the full pass then names the fault). References are not known before finalize,
// so they are scanned there (frameTasks.ts), only when the narinfo declares some.
import { createCpuPool, type CpuPool } from '../cpuPool.js';
import type { CheckedNar } from './stagedCheck.js';

/**
 * The tasks of each upload, one after another: piscina does not keep the order of tasks sent to a
 * busy thread (seen here: a batch sent later ran first), and a check must see its bytes in order.
 */
class UploadQueues {
  private readonly queues = new Map<string, { tail: Promise<unknown>; waiting: number }>();

  constructor(readonly thread: CpuPool) {}

  /** Runs `work` after the upload's earlier tasks; its result (null when it failed). */
  then<T>(upload: string, work: () => Promise<T>): Promise<T | null> {
    let queue = this.queues.get(upload);
    if (queue === undefined) {
      queue = { tail: Promise.resolve(), waiting: 0 };
      this.queues.set(upload, queue);
    }
    const entry = queue;
    entry.waiting++;
    const run = entry.tail.then(work).catch(() => null);
    entry.tail = run.finally(() => {
      entry.waiting--;
      if (entry.waiting === 0 && this.queues.get(upload) === entry) this.queues.delete(upload);
    });
    return run;
  }
}

export class StagedChecks {
  private readonly queues: UploadQueues;

  private constructor(private readonly thread: CpuPool) {
    this.queues = new UploadQueues(thread);
  }

  static open(): StagedChecks {
    // The thread holds the uploads' check state: one that ended would leave each finalize the full pass.
    return new StagedChecks(createCpuPool({ maxThreads: 1, idleThreadMs: 24 * 3600_000 }));
  }

  /**
   * Checks the bytes [from, to) of the upload's staged file, once they are written: the check
   * thread reads them back (from the page cache, into one buffer it reuses) rather than being
   * sent the received pieces, which would cost a copy and an allocation per piece.
   */
  advance(upload: string, file: string, from: number, to: number): void {
    void this.queues.then(upload, () => this.thread.run('checkStagedBytes', { upload, file, from, to }));
  }

  /** The upload's digest and listing when its check covers exactly `narSize` well-formed bytes; else null. */
  result(upload: string, narSize: number): Promise<CheckedNar | null> {
    return this.queues.then(upload, () => this.thread.run('stagedCheckResult', { upload, narSize }));
  }

  /** Forgets an upload: ingested, abandoned, or a chunk whose bytes do not count. */
  drop(upload: string): void {
    void this.queues.then(upload, () => this.thread.run('dropStagedCheck', { upload }));
  }

  close(): Promise<void> {
    return this.thread.destroy();
  }
}
