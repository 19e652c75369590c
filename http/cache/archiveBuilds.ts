// At most `cache.serveArchiveConcurrency` directory archives are packed at once in this process:
// each costs a zstd decompressor, a tar packer and a compressor for as long as its client reads.
// A request past the bound is refused (503 with Retry-After) rather than queued, so anonymous
// clients cannot line up unbounded work behind the ones being served.
export class ArchiveBuilds {
  private active = 0;

  constructor(readonly limit: number) {
    if (!(limit >= 1)) throw new Error(`cache.serveArchiveConcurrency must be at least 1, got ${limit}`);
  }

  /** A place for one archive, as the function that gives it back (once), or null when all are taken. */
  tryStart(): (() => void) | null {
    if (this.active >= this.limit) return null;
    this.active++;
    let finished = false;
    return () => {
      if (finished) return;
      finished = true;
      this.active--;
    };
  }

  get inUse(): number {
    return this.active;
  }
}
