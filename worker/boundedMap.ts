// A Map that holds at most `capacity` entries: past it, the one least recently read or written
// goes. For a long-running worker's memos (worker/storeTrust.ts), which would otherwise grow with
// every path and tenant it ever saw; a dropped entry only costs working it out again.
export class BoundedMap<K, V> {
  private readonly entries = new Map<K, V>();

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new Error(`a BoundedMap holds at least one entry, not ${capacity}`);
  }

  get size(): number {
    return this.entries.size;
  }

  /** The value, which becomes the most recently used (a Map keeps insertion order: re-inserted, it goes last). */
  get(key: K): V | undefined {
    if (!this.entries.has(key)) return undefined;
    const value = this.entries.get(key)!;
    this.entries.delete(key);
    this.entries.set(key, value);
    return value;
  }

  has(key: K): boolean {
    return this.entries.has(key);
  }

  set(key: K, value: V): void {
    this.entries.delete(key);
    this.entries.set(key, value);
    if (this.entries.size > this.capacity) this.entries.delete(this.entries.keys().next().value!);
  }

  delete(key: K): void {
    this.entries.delete(key);
  }

  /** Oldest first, without touching their order. */
  [Symbol.iterator](): IterableIterator<[K, V]> {
    return this.entries[Symbol.iterator]();
  }
}
