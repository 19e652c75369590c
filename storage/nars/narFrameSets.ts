// The compressed frames of staged NARs (narFrames.ts), made in the CPU pool in the background as a
// chunked upload's bytes become final, so finalize finds most of the compression already done. A
// frame file is written under a temporary name and renamed, and covers only bytes the staged row
// counts, which never change, so a frame file that exists is right even after a restart. The frames
// are also joined into the stored file as they complete (frameJoin.ts).
import { rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { CpuPool } from '../cpuPool.js';
import { FrameJoin } from './frameJoin.js';
import { frameCount, frameRange, FRAME_BYTES } from './narFrames.js';

/** Uploads joined at once; beyond it the oldest join is dropped (its finalize joins in one pass). */
const MAX_JOINS = 64;

export class NarFrameSets {
  private readonly running = new Map<string, Promise<unknown>>();
  private readonly joins = new Map<string, FrameJoin>();

  constructor(
    private readonly cpu: CpuPool,
    private readonly zstdLevel: number,
  ) {}

  /** Starts compressing every whole frame below `staged` bytes that is neither done nor underway; does not wait. */
  advance(dir: string, source: string, staged: number): void {
    const whole = Math.floor(staged / FRAME_BYTES);
    for (let index = 0; index < whole; index++) {
      const output = join(dir, `${index}.zst`);
      if (this.running.has(output)) continue;
      void stat(output).then(
        () => undefined,
        () => {
          if (!this.running.has(output)) this.compress(dir, output, source, index, (index + 1) * FRAME_BYTES).catch(() => undefined);
        },
      );
    }
    // After a restart the join starts again at frame 0: the frame files on disk are still right.
    let joining = this.joins.get(dir);
    if (joining === undefined) {
      joining = new FrameJoin(dir);
      this.joins.set(dir, joining);
      if (this.joins.size > MAX_JOINS) {
        const [oldest, dropped] = this.joins.entries().next().value!;
        this.joins.delete(oldest);
        void dropped.discard();
      }
    }
    joining.allow(whole);
  }

  /** Every frame of a NAR of `narSize` bytes, compressing (in parallel) what is missing; the files in order. */
  async complete(dir: string, source: string, narSize: number): Promise<string[]> {
    const frames = Array.from({ length: frameCount(narSize) }, (_, index) => join(dir, `${index}.zst`));
    await Promise.all(
      frames.map(async (output, index) => {
        // A background run that failed is simply tried again here.
        await this.running.get(output)?.catch(() => undefined);
        if (await stat(output).then(() => true, () => false)) return;
        await this.compress(dir, output, source, index, narSize);
      }),
    );
    return frames;
  }

  /**
   * The stored file of `frames` (from complete()) as `output`, finished from what was joined while
   * the chunks arrived; null when nothing was (the caller joins in one pass).
   */
  async joined(dir: string, frames: string[], output: string): Promise<{ fileHash: string; fileSize: number } | null> {
    const joining = this.joins.get(dir);
    if (joining === undefined) return null;
    this.joins.delete(dir);
    const file = await joining.finish(frames, output).catch(() => null);
    if (file === null) await joining.discard();
    return file;
  }

  /** Removes the frames of an upload once it is ingested or abandoned. */
  async discard(dir: string): Promise<void> {
    const prefix = `${dir}/`;
    await Promise.all([...this.running].filter(([file]) => file.startsWith(prefix)).map(([, run]) => run.catch(() => undefined)));
    const joining = this.joins.get(dir);
    this.joins.delete(dir);
    await joining?.discard();
    await rm(dir, { recursive: true, force: true });
  }

  private compress(dir: string, output: string, source: string, index: number, narSize: number): Promise<unknown> {
    const { start, end } = frameRange(index, narSize);
    const run = this.cpu.run('compressNarFrame', { source, start, end, output, zstdLevel: this.zstdLevel }).finally(() => {
      this.running.delete(output);
      this.joins.get(dir)?.pump();
    });
    this.running.set(output, run);
    return run;
  }
}
