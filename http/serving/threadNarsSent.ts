// The NAR files a serving thread sent (threadNars.ts), reported to the main thread every REPORT_MS
// as traffic (metrics, per-minute counters, `cache.nar.fetched`), as its own answers count.
import type { NarGrant, NarSent } from './threadMessages.js';

/** How often sent files are reported to the main thread. */
const REPORT_MS = 100;

export class SentNars {
  // Counted per grant (one object per cache and file while kept), so a send makes nothing new: at
  // tens of thousands of small NARs a second, an entry per send cost the main thread more than
  // the threads spent sending (bench/README.md, session 21).
  private sent = new Map<NarGrant, NarSent>();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly report: (sent: NarSent[]) => void) {}

  /** A GET of the grant's file was answered: its size is traffic. */
  add(grant: NarGrant): void {
    this.timer ??= setTimeout(() => this.flush(), REPORT_MS).unref();
    const entry = this.sent.get(grant);
    if (entry === undefined) this.sent.set(grant, { cacheId: grant.cacheId, cache: grant.cache, fileHash: grant.fileHash, bytes: grant.fileSize, fetches: 1 });
    else {
      entry.bytes += grant.fileSize;
      entry.fetches++;
    }
  }

  /** Reports the files sent since the last report now, if any were. */
  flush(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (this.sent.size === 0) return;
    const batch = [...this.sent.values()];
    this.sent = new Map();
    this.report(batch);
  }
}
