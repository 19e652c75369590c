// The stored file of a chunked upload, joined while its chunks arrive: each frame is appended, in
// order, as soon as it and all before it are compressed, with the FileHash updated on the way, so
// finalize only appends the last frames. (An fdatasync per frame was tried: on ext4 it also flushed
// the staging writes and made the appends fall behind; the blob store fsyncs the file once.) Only
// this process's memory knows how far the file is valid; without that state (a restart) finalize
// joins the frame files in one pass (frameTasks.ts joinNarFrames), with the same bytes: frames
// depend only on the NAR.
import { createHash, type Hash } from 'node:crypto';
import { mkdir, open, rename, rm, type FileHandle } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { sha256Nix32 } from '../../protocol/index.js';

export class FrameJoin {
  /** Frames appended so far (0…next-1). */
  private next = 0;
  private size = 0;
  private readonly hash: Hash = createHash('sha256');
  /** Frames known to be final and allowed in: whole frames below the staged count. */
  private allowed = 0;
  private work: Promise<void> = Promise.resolve();
  private failed = false;
  readonly file: string;

  constructor(private readonly dir: string) {
    this.file = join(dir, 'joined.zst.partial');
  }

  /** Lets frames below `count` in, appending those already compressed; does not wait. */
  allow(count: number): void {
    if (count > this.allowed) this.allowed = count;
    this.pump();
  }

  /** Appends what is compressed and allowed; runs one after another. */
  pump(): void {
    this.work = this.work.then(() => this.appendReady()).catch(() => {
      // A disk fault or a frame directory discarded meanwhile: finalize joins in one pass instead.
      this.failed = true;
    });
  }

  /**
   * Appends the rest of `frames` (every frame of the NAR, compressed) and hands the whole file over
   * as `output`; null when this join cannot finish it (then nothing was moved).
   */
  async finish(frames: string[], output: string): Promise<{ fileHash: string; fileSize: number } | null> {
    await this.work;
    if (this.failed || this.next > frames.length) return null;
    this.allowed = frames.length;
    this.pump();
    await this.work;
    if (this.failed || this.next !== frames.length) return null;
    this.failed = true; // consumed: the file moves away and the hash is final
    await mkdir(dirname(output), { recursive: true });
    await rename(this.file, output);
    return { fileHash: sha256Nix32(this.hash.digest()).slice('sha256:'.length), fileSize: this.size };
  }

  /** Waits for the appending underway and removes the partial file. */
  async discard(): Promise<void> {
    this.failed = true;
    await this.work;
    await rm(this.file, { force: true });
  }

  private async appendReady(): Promise<void> {
    let handle: FileHandle | null = null;
    try {
      while (!this.failed && this.next < this.allowed) {
        let scratch = spareBuffer ?? Buffer.alloc(0);
        spareBuffer = null;
        try {
          const read = await readFrame(join(this.dir, `${this.next}.zst`), scratch);
          if (read === null) break; // still compressing: its completion pumps again
          scratch = read.buffer;
          handle ??= await open(this.file, this.next === 0 ? 'w' : 'r+', 0o600);
          await writeFully(handle, read.frame, this.size);
          this.hash.update(read.frame);
          this.size += read.frame.length;
          this.next++;
        } finally {
          spareBuffer = scratch;
        }
      }
    } finally {
      await handle?.close();
    }
  }
}

/**
 * One buffer the joins read frames into, reused from frame to frame: a fresh 10 MiB buffer per
 * frame showed up as garbage collection on the event loop. A join that finds it taken uses its own.
 */
let spareBuffer: Buffer | null = null;

/** A frame file's bytes, read into `scratch` or a larger buffer; null when the file does not exist yet. */
async function readFrame(path: string, scratch: Buffer): Promise<{ frame: Buffer; buffer: Buffer } | null> {
  const source = await open(path, 'r').catch((e: NodeJS.ErrnoException) => {
    if (e.code === 'ENOENT') return null;
    throw e;
  });
  if (source === null) return null;
  try {
    const { size } = await source.stat();
    const into = scratch.length >= size ? scratch : Buffer.allocUnsafe(size);
    let filled = 0;
    while (filled < size) {
      const { bytesRead } = await source.read(into, filled, size - filled, filled);
      if (bytesRead === 0) throw new Error(`${path} ended at byte ${filled} of ${size}`);
      filled += bytesRead;
    }
    return { frame: into.subarray(0, size), buffer: into };
  } finally {
    await source.close();
  }
}

async function writeFully(handle: FileHandle, bytes: Buffer, position: number): Promise<void> {
  let done = 0;
  while (done < bytes.length) {
    const { bytesWritten } = await handle.write(bytes, done, bytes.length - done, position + done);
    if (bytesWritten === 0) throw new Error(`writing the joined NAR file made no progress at byte ${position + done}`);
    done += bytesWritten;
  }
}
