// The stored file of a staged NAR, joined from its compressed frames as they come back from the CPU
// pool: each frame is appended, in order, as soon as it and all before it are there, with the
// FileHash updated on the way, so finalize only appends the last frames. Frames wait here in memory
// for their turn, never in files of their own: every compressed byte is written once.
//
// Durability is the blob store's fsync at finalize, which the client waits for: a whole 340 MB
// file measured ~0.3 s here. So every 64 MiB joined, an fdatasync runs in the background, never
// awaited by the appends (one awaited per frame made them fall behind the pool), and the fsync at
// finalize finds only the last frames left to write.
import { createHash, type Hash } from 'node:crypto';
import { mkdir, open, rename, rm, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import { sha256Nix32 } from '../../protocol/index.js';

/** Joined bytes after which a background fdatasync starts (one at a time). */
const SYNC_AHEAD_BYTES = 64 << 20;

export class FrameJoin {
  /** Frames appended so far (0…next-1). */
  private next = 0;
  private size = 0;
  private readonly hash: Hash = createHash('sha256');
  /** Compressed frames that came back before one of their predecessors. */
  private readonly waiting = new Map<number, Uint8Array>();
  /** The frame being written, out of `waiting`. */
  private writing: number | null = null;
  private work: Promise<void> = Promise.resolve();
  /** Bytes a background fdatasync has made (or is making) durable; the one running. */
  private syncedUpTo = 0;
  private syncing: Promise<void> | null = null;
  private failure: Error | null = null;

  constructor(
    readonly file: string,
    /** called after frames were appended: their owner may compress more */
    private readonly onAppended: () => void = () => undefined,
    /** called with each frame's bytes once they are no longer needed (written, or dropped): their memory may be reused */
    private readonly onDone: (bytes: Uint8Array) => void = () => undefined,
  ) {}

  /** Frames appended so far. */
  get appended(): number {
    return this.next;
  }

  /** Whether frame `index` is appended or waiting for its turn. */
  holds(index: number): boolean {
    return index < this.next || index === this.writing || this.waiting.has(index);
  }

  get failed(): boolean {
    return this.failure !== null;
  }

  /** Takes frame `index`'s compressed bytes, appending them (and any waiting after them) when their turn comes. */
  offer(index: number, bytes: Uint8Array): void {
    if (this.failure !== null || index < this.next) {
      this.onDone(bytes);
      return;
    }
    this.waiting.set(index, bytes);
    if (index === this.next) this.work = this.work.then(() => this.appendReady()).catch((e: unknown) => this.fail(e));
  }

  /** Resolves when the appending underway is done. */
  idle(): Promise<void> {
    return this.work;
  }

  /** Gives up: a frame could not be made or the file not written. finish() then throws `cause`. */
  fail(cause: unknown): void {
    this.failure ??= cause instanceof Error ? cause : new Error(String(cause));
    // Not the frame being written: it is out of the map, and its write gives it back when done.
    for (const bytes of this.waiting.values()) this.onDone(bytes);
    this.waiting.clear();
  }

  /** Hands the file of exactly `count` frames over as `output`, once the appending underway is done. */
  async finish(count: number, output: string): Promise<{ fileHash: string; fileSize: number }> {
    await this.work;
    await this.syncing;
    if (this.failure !== null) throw this.failure;
    if (this.next !== count) throw new Error(`the stored NAR file has ${this.next} of its ${count} frames`);
    this.fail(new Error('the joined file was handed over')); // its hash is final: nothing more goes in
    await mkdir(dirname(output), { recursive: true });
    await rename(this.file, output);
    return { fileHash: sha256Nix32(this.hash.digest()).slice('sha256:'.length), fileSize: this.size };
  }

  /** Stops, waits for the appending underway and removes the partial file. */
  async discard(): Promise<void> {
    this.fail(new Error('the join was discarded'));
    await this.work;
    await this.syncing;
    await rm(this.file, { force: true });
  }

  private async appendReady(): Promise<void> {
    let handle: FileHandle | null = null;
    const before = this.next;
    try {
      for (let frame = this.waiting.get(this.next); frame !== undefined && this.failure === null; frame = this.waiting.get(this.next)) {
        this.waiting.delete(this.next);
        this.writing = this.next;
        try {
          if (handle === null) {
            await mkdir(dirname(this.file), { recursive: true });
            handle = await open(this.file, this.next === 0 ? 'w' : 'r+', 0o600);
          }
          await writeFully(handle, frame, this.size);
          this.hash.update(frame);
        } finally {
          this.writing = null;
          this.onDone(frame);
        }
        this.size += frame.length;
        this.next++;
      }
    } finally {
      await handle?.close();
    }
    if (this.next > before) {
      this.syncAhead();
      this.onAppended();
    }
  }

  /** Starts writing the joined bytes to disk, unless a sync is running or little is new. */
  private syncAhead(): void {
    if (this.syncing !== null || this.failure !== null || this.size - this.syncedUpTo < SYNC_AHEAD_BYTES) return;
    this.syncedUpTo = this.size;
    this.syncing = (async () => {
      const handle = await open(this.file, 'r');
      try {
        await handle.datasync();
      } finally {
        await handle.close();
      }
    })()
      // Only an early start: the blob store's fsync is what makes the file durable, and it reports failures.
      .catch(() => undefined)
      .finally(() => {
        this.syncing = null;
      });
  }
}

async function writeFully(handle: FileHandle, bytes: Uint8Array, position: number): Promise<void> {
  let done = 0;
  while (done < bytes.length) {
    const { bytesWritten } = await handle.write(bytes, done, bytes.length - done, position + done);
    if (bytesWritten === 0) throw new Error(`writing the joined NAR file made no progress at byte ${position + done}`);
    done += bytesWritten;
  }
}
