// One request at a time per staged upload in this process: a second chunk or finalize for the same
// upload while one runs is refused at once (409) instead of interleaving writes to one file. The
// staging file lives on this process's disk, so a lock across processes would protect nothing more.

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
