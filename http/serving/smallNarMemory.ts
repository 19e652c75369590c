// A serving thread's memory of small NAR files (docs/http.md, "Serving threads"): files up to
// nar.smallBytes that the thread read from the blob store stay in its memory, up to a byte budget,
// oldest out, as the main thread keeps them in its hot cache. The bytes under a FileHash never
// change (content-addressed), so nothing goes stale; whether a request may have them is still the
// grant's to say (threadNars.ts), so the memory is looked at only under a live grant.

export class SmallNarMemory {
  private readonly files = new Map<string, Buffer>();
  private bytes = 0;

  /** `maxFileBytes` (nar.smallBytes) and `budget` 0: nothing is kept. */
  constructor(readonly maxFileBytes: number, private readonly budget: number) {}

  /** Whether a file of `size` bytes is kept once read. */
  keeps(size: number): boolean {
    return size <= this.maxFileBytes && size <= this.budget;
  }

  get(fileHash: string): Buffer | undefined {
    return this.files.get(fileHash);
  }

  keep(fileHash: string, bytes: Buffer): void {
    if (!this.keeps(bytes.length) || this.files.has(fileHash)) return;
    this.files.set(fileHash, bytes);
    this.bytes += bytes.length;
    // Oldest first out (a Map iterates in insertion order).
    for (const [oldest, kept] of this.files) {
      if (this.bytes <= this.budget) break;
      this.files.delete(oldest);
      this.bytes -= kept.length;
    }
  }
}
