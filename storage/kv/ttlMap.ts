// An in-process memo whose entries expire: answers worth remembering for a few seconds (a cache's
// upstream list, who may read a cache). Bounded by entry count so that a stream of distinct keys
// (random credentials, unknown paths) cannot grow it without limit: when full, expired entries go
// first, then the oldest written ones. storage/nars/hotCache.ts is the byte-bounded cache for
// narinfos and NAR bytes; this one counts entries, not bytes.

interface Entry<V> {
  value: V;
  /** `now()` at and after which the entry is not handed out */
  expires: number;
}

export class TtlMap<V> {
  private readonly entries = new Map<string, Entry<V>>();

  constructor(
    readonly maxEntries: number,
    private readonly now: () => number = Date.now,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  /** The value set under `key` while it lives; undefined once it expired or was never set. */
  get(key: string): V | undefined {
    const entry = this.entries.get(key);
    return entry !== undefined && entry.expires > this.now() ? entry.value : undefined;
  }

  /**
   * The value under `key`, expired or not, until it is overwritten, deleted or pushed out: for an
   * answer that may be used once more while a fresh one is fetched.
   */
  peek(key: string): { value: V; fresh: boolean } | undefined {
    const entry = this.entries.get(key);
    return entry === undefined ? undefined : { value: entry.value, fresh: entry.expires > this.now() };
  }

  set(key: string, value: V, ttlMs: number): void {
    if (this.entries.size >= this.maxEntries) this.makeRoom();
    this.entries.delete(key);
    this.entries.set(key, { value, expires: this.now() + ttlMs });
  }

  delete(key: string): void {
    this.entries.delete(key);
  }

  /** Drops every entry whose key starts with `prefix` (one cache's answers when it changes). */
  deletePrefix(prefix: string): void {
    for (const key of this.entries.keys()) if (key.startsWith(prefix)) this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
  }

  /** Drops the expired entries, then the oldest ones (a Map keeps insertion order) until one more fits. */
  private makeRoom(): void {
    const now = this.now();
    for (const [key, entry] of this.entries) if (entry.expires <= now) this.entries.delete(key);
    for (const key of this.entries.keys()) {
      if (this.entries.size < this.maxEntries) return;
      this.entries.delete(key);
    }
  }
}
