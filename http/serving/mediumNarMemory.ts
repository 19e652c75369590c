// A serving thread's memory of medium NAR files (docs/http.md, "Serving threads"): files above
// nar.smallBytes, up to a size limit, kept once read within a byte budget, so that a file in
// steady demand is sent from memory (one copy a byte) instead of read again (issue 22, 2 MiB NARs).
// As for small files, the bytes under a FileHash never change, and whether a request may have them
// is the grant's to say (threadNars.ts): the memory is looked at only under a live grant.
//
// Unlike the small files' memory, a full one does not push out a file in use for a new one: with
// more files in demand than the budget holds, oldest-out would make every request a miss that
// reads its file into a buffer of its own (megabytes allocated per request, where the streamed
// path reuses two). A file goes only once idle for `idleMs`; until then new files are streamed.

export class MediumNarMemory {
  /** least recently used first */
  private readonly files = new Map<string, { bytes: Buffer; used: number }>();
  private bytes = 0;

  /** `budget` 0: nothing is kept. */
  constructor(readonly maxFileBytes: number, private readonly budget: number, private readonly idleMs = 60_000, private readonly now: () => number = Date.now) {}

  /** Whether a file of `size` bytes would be kept once read: it fits, counting what idle files would free. */
  keeps(size: number): boolean {
    if (size > this.maxFileBytes || size > this.budget) return false;
    let free = this.budget - this.bytes;
    const idleBefore = this.now() - this.idleMs;
    for (const file of this.files.values()) {
      if (free >= size || file.used > idleBefore) break;
      free += file.bytes.length;
    }
    return free >= size;
  }

  get(fileHash: string): Buffer | undefined {
    const file = this.files.get(fileHash);
    if (file === undefined) return undefined;
    file.used = this.now();
    this.files.delete(fileHash);
    this.files.set(fileHash, file);
    return file.bytes;
  }

  /** Keeps `bytes` if they fit once idle files are out; otherwise they are not kept (they were sent anyway). */
  keep(fileHash: string, bytes: Buffer): void {
    if (this.files.has(fileHash) || !this.keeps(bytes.length)) return;
    for (const [oldest, file] of this.files) {
      if (this.bytes + bytes.length <= this.budget) break;
      this.files.delete(oldest);
      this.bytes -= file.bytes.length;
    }
    this.files.set(fileHash, { bytes, used: this.now() });
    this.bytes += bytes.length;
  }
}
