// The in-memory cache in front of narinfo lookups and small NARs (nar.hotCacheBytes): once the byte
// total passes the capacity, entries not used since they were last looked at go first (CLOCK, a
// cheap approximation of least-recently-used: a hit only sets a flag, where true LRU would move the
// entry on every narinfo request). Entries may carry a time to live: what another server process
// changes reaches this one no later than that.

interface Entry<V> {
  value: V;
  bytes: number;
  /** set by a hit; eviction gives such an entry a second chance instead of dropping it */
  used: boolean;
  /** epoch ms after which the entry is not served; Infinity for immutable content */
  expires: number;
}

/** Bookkeeping per entry beyond its own bytes: the key, the Map slot, the entry object. */
const ENTRY_OVERHEAD = 96;

export class HotCache<V> {
  private readonly entries = new Map<string, Entry<V>>();
  private total = 0;
  /** lookups that found an entry (served or stale), and lookups that did not: kiln_hot_cache_lookups_total */
  hits = 0;
  misses = 0;

  constructor(
    readonly capacityBytes: number,
    private readonly now: () => number = Date.now,
  ) {}

  get bytes(): number {
    return this.total;
  }

  get size(): number {
    return this.entries.size;
  }

  get(key: string): V | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) {
      this.misses++;
      return undefined;
    }
    if (entry.expires <= this.now()) {
      this.misses++;
      this.drop(key, entry);
      return undefined;
    }
    this.hits++;
    entry.used = true;
    return entry.value;
  }

  /**
   * Like get, but an expired entry is still handed out and kept (stale when `expires <= time()`):
   * for answers that may be served once more while a fresh one is being fetched. The entry itself,
   * not a copy: this is on the path of every narinfo request.
   */
  peekEntry(key: string): Readonly<{ value: V; expires: number }> | undefined {
    const entry = this.entries.get(key);
    if (entry !== undefined) {
      this.hits++;
      entry.used = true;
    } else this.misses++;
    return entry;
  }

  /** The clock entries expire by. */
  time(): number {
    return this.now();
  }

  /** Stores `value` as `bytes` big; values larger than an eighth of the capacity are not kept. */
  set(key: string, value: V, bytes: number, ttlMs = Infinity): void {
    const size = bytes + key.length + ENTRY_OVERHEAD;
    if (size > this.capacityBytes / 8) return;
    const old = this.entries.get(key);
    if (old) this.drop(key, old);
    this.entries.set(key, { value, bytes: size, used: false, expires: this.now() + ttlMs });
    this.total += size;
    if (this.total > this.capacityBytes) this.evict();
  }

  /** From the oldest entry on: a used one moves to the end with its flag cleared, an unused one goes. */
  private evict(): void {
    let budget = 2 * this.entries.size; // every entry is passed over at most twice
    for (const [key, entry] of this.entries) {
      if (this.total <= this.capacityBytes || budget-- <= 0) return;
      if (entry.used) {
        entry.used = false;
        this.entries.delete(key);
        this.entries.set(key, entry);
      } else {
        this.drop(key, entry);
      }
    }
  }

  delete(key: string): void {
    const entry = this.entries.get(key);
    if (entry) this.drop(key, entry);
  }

  /** Drops every entry whose key starts with `prefix` (a cache's entries when it changes). */
  deletePrefix(prefix: string): void {
    for (const [key, entry] of this.entries) if (key.startsWith(prefix)) this.drop(key, entry);
  }

  clear(): void {
    this.entries.clear();
    this.total = 0;
  }

  private drop(key: string, entry: Entry<V>): void {
    this.entries.delete(key);
    this.total -= entry.bytes;
  }
}
