// A serving thread's memories of NAR files (docs/http.md, "Serving threads"): one of small files (up
// to nar.smallBytes) and one of medium ones (above it, at least MEDIUM_NAR_MIN_BYTES, up to a size
// limit), each a NarMemory. A file read once is kept within the memory's byte budget, so that a file
// in steady demand is sent from memory (one copy a byte) instead of read again (issue 22). The bytes
// under a FileHash never change; whether a request may have them is the grant's to say
// (threadNars.ts): a memory is looked at only under a live grant.
//
// The budget bounds every file the memory's sends hold (review r6b-1, r6b-2, r7a-1): a read meant
// to be kept reserves its room first (two misses cannot count the same room), and a file leaves only
// once no send of it is in flight and it has been idle for `idleMs` (a slow reader's send keeps it,
// and its bytes stay counted). A file the memory cannot make room for is streamed, never read whole.
//
// The medium memory does not push out a file used within the last minute for a new one: with more
// files in demand than the budget holds, oldest-out would make every request a miss that reads its
// file into a buffer of its own (megabytes allocated per request, where the streamed path reuses
// two). The small one does (idleMs 0: oldest out, as the main thread's hot cache), except files in
// flight.

/** Below this a file is not worth a medium place (nar.smallBytes 0 would otherwise send every file here). */
export const MEDIUM_NAR_MIN_BYTES = 64 * 1024;

interface Kept { bytes: Buffer; used: number; sending: number }

export interface NarMemoryOptions {
  /** the files this memory is for: from minFileBytes to maxFileBytes */
  minFileBytes: number;
  maxFileBytes: number;
  /** 0: nothing is kept */
  budget: number;
  /** how long a file must have gone unsent before a new one may take its room */
  idleMs: number;
  now?: () => number;
  /** hears the bytes held (kept and reserved) on every change */
  report?: (bytes: number) => void;
}

export class NarMemory {
  /** least recently used first */
  private readonly files = new Map<string, Kept>();
  private kept = 0;
  private reserved = 0;
  private readonly now: () => number;
  private readonly report: (bytes: number) => void;

  constructor(private readonly opts: NarMemoryOptions) {
    this.now = opts.now ?? (() => performance.now());
    this.report = opts.report ?? (() => undefined);
  }

  /** Bytes held: files kept and reads under way that were given room. */
  get bytes(): number {
    return this.kept + this.reserved;
  }

  /** Whether a file of `size` bytes belongs in this memory at all. */
  holds(size: number): boolean {
    return size >= this.opts.minFileBytes && size <= this.opts.maxFileBytes && size <= this.opts.budget;
  }

  /** The kept bytes of `fileHash`, if any; not marked used (a request that falls through must not keep a file in). */
  get(fileHash: string): Buffer | undefined {
    return this.files.get(fileHash)?.bytes;
  }

  /** A send of `fileHash` from memory outlasts its handler: the file stays until the returned function says it ended. */
  sending(fileHash: string): () => void {
    const file = this.files.get(fileHash);
    if (file === undefined) return () => undefined;
    file.sending++;
    this.touch(fileHash, file);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      file.sending--;
      if (this.files.get(fileHash) === file) this.touch(fileHash, file);
    };
  }

  /**
   * Room for a read of `size` bytes meant to be kept: true once reserved (idle files not being sent
   * leave for it), false when there is none (the caller streams the file). Ends with keep() or release().
   */
  reserve(size: number): boolean {
    if (!this.holds(size)) return false;
    let free = this.opts.budget - this.bytes;
    const idleBefore = this.now() - this.opts.idleMs;
    const leaving: string[] = [];
    for (const [fileHash, file] of this.files) {
      if (free >= size || file.used > idleBefore) break;
      if (file.sending > 0) continue;
      free += file.bytes.length;
      leaving.push(fileHash);
    }
    if (free < size) return false;
    for (const fileHash of leaving) {
      this.kept -= this.files.get(fileHash)!.bytes.length;
      this.files.delete(fileHash);
    }
    this.reserved += size;
    this.report(this.bytes);
    return true;
  }

  /** The reserved read of `size` bytes ended without bytes to keep. */
  release(size: number): void {
    this.reserved -= size;
    this.report(this.bytes);
  }

  /**
   * Keeps the bytes of a reserved read and gives back the bytes to send: the file's kept ones, the
   * first kept if another read kept it first (review r7a-2: the thread sends one copy, counted).
   */
  keep(fileHash: string, bytes: Buffer): Buffer {
    this.reserved -= bytes.length;
    let file = this.files.get(fileHash);
    if (file === undefined) {
      file = { bytes, used: this.now(), sending: 0 };
      this.files.set(fileHash, file);
      this.kept += bytes.length;
    }
    this.report(this.bytes);
    return file.bytes;
  }

  private touch(fileHash: string, file: Kept): void {
    file.used = this.now();
    this.files.delete(fileHash);
    this.files.set(fileHash, file);
  }
}
