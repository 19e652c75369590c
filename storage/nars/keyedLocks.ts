// One request at a time per staged upload in this process: a second chunk or finalize for the same
// upload while one runs is refused at once (409) instead of interleaving writes to one file. It
// answers this process's own contention without a query; server processes sharing the staging
// directory are kept apart by the claim on the upload's row (narUploads.ts, migration 0016).

export class KeyedLocks {
  private readonly held = new Set<string>();

  /** A release function, or null when `key` is held. */
  tryAcquire(key: string): (() => void) | null {
    if (this.held.has(key)) return null;
    this.held.add(key);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.held.delete(key);
    };
  }
}
