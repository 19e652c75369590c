// worker.nixDaemon.maxConnections: every Nix command the worker runs holds one connection to the
// store while it runs (a nix-daemon socket, or the local store's database with NIX_REMOTE=local).
// Past the bound, the next command waits in arrival order. The store serves the whole machine, so
// the bound belongs to the worker process, not to one job or one connection to a server: it is
// set once when the worker starts (the last worker started in one process sets it).
export class StoreConnections {
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private limit: number) {
    StoreConnections.check(limit);
  }

  private static check(limit: number): void {
    if (!Number.isInteger(limit) || limit < 1) throw new Error(`worker.nixDaemon.maxConnections must be a positive integer, got ${limit}`);
  }

  /** A new bound; waiters it makes room for start at once. */
  setLimit(limit: number): void {
    StoreConnections.check(limit);
    this.limit = limit;
    while (this.active < this.limit && this.waiting.length > 0) {
      this.active++;
      this.waiting.shift()!();
    }
  }

  /** Runs `command` once a connection is free, and frees it when the command settles. */
  async hold<T>(command: () => Promise<T>): Promise<T> {
    if (this.active < this.limit) this.active++;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await command();
    } finally {
      const next = this.waiting.shift();
      // The connection passes straight to the next waiter, so `active` stays as it is.
      if (next && this.active <= this.limit) next();
      else {
        this.active--;
        if (next) this.waiting.unshift(next);
      }
    }
  }

  get inUse(): number {
    return this.active;
  }

  get queued(): number {
    return this.waiting.length;
  }
}

/** The worker process's bound; until a worker starts, the option's default for one build slot. */
export const storeConnections = new StoreConnections(1 * 9 + 16);
