// At most `limit` holders at once; the others wait in arrival order. Used to bound the narinfo
// queries to upstream caches server-wide (cache.upstreamQueryConcurrency).
export class Semaphore {
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly limit: number) {
    if (!(limit >= 1)) throw new Error(`a semaphore needs a limit of at least 1, got ${limit}`);
  }

  /** Runs `work` once a place is free, and frees the place when it settles. */
  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.active++;
    try {
      return await work();
    } finally {
      const next = this.waiting.shift();
      // The place passes straight to the next waiter, so `active` stays as it is.
      if (next) next();
      else this.active--;
    }
  }

  get inUse(): number {
    return this.active;
  }

  get queued(): number {
    return this.waiting.length;
  }
}
