// The compressed frames of staged NARs (narFrames.ts), made in the CPU pool as a chunked upload's
// bytes become final, while the client sends the next chunk, and joined into the stored file as
// they come back (frameJoin.ts): finalize finds most of the compression and the join done. A frame
// covers only bytes the staged row counts, which never change. The state is this process's memory
// alone: after a restart, or for an upload whose state was dropped, the frames are made again from
// the staged file (by the next chunk, or at finalize), with the same bytes: frames depend only on
// the NAR.
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { CpuPool } from '../cpuPool.js';
import { FrameJoin } from './frameJoin.js';
import { frameCount, frameRange, FRAME_BYTES } from './narFrames.js';

/** Uploads followed at once; beyond it the oldest is dropped (its finalize compresses again). */
const MAX_FOLLOWED = 64;

interface FrameSet {
  join: FrameJoin;
  /** frames being compressed, by index */
  compressing: Map<number, Promise<void>>;
}

export class NarFrameSets {
  private readonly sets = new Map<string, FrameSet>();

  constructor(
    private readonly cpu: CpuPool,
    private readonly zstdLevel: number,
  ) {}

  /** Starts compressing every whole frame below `staged` bytes that is neither joined nor underway; does not wait. */
  advance(dir: string, source: string, staged: number): void {
    const set = this.followed(dir);
    this.request(set, source, Math.floor(staged / FRAME_BYTES), staged);
  }

  /**
   * The stored file of the NAR's `narSize` staged bytes as `output`: what was compressed and joined
   * while the chunks arrived, the rest compressed now in parallel.
   */
  async stored(dir: string, source: string, narSize: number, output: string): Promise<{ fileHash: string; fileSize: number }> {
    let set = this.sets.get(dir);
    if (set !== undefined && set.join.failed) {
      // A frame or a write failed in the background: start over once, from the staged file.
      this.sets.delete(dir);
      await this.stop(set);
      set = undefined;
    }
    set ??= this.followed(dir);
    const count = frameCount(narSize);
    this.request(set, source, count, narSize);
    await Promise.all(set.compressing.values());
    this.sets.delete(dir);
    try {
      return await set.join.finish(count, output);
    } catch (e) {
      await set.join.discard();
      throw e;
    }
  }

  /** Forgets an upload's frames once it is ingested or abandoned, and removes its directory. */
  async discard(dir: string): Promise<void> {
    const set = this.sets.get(dir);
    this.sets.delete(dir);
    if (set !== undefined) await this.stop(set);
    await rm(dir, { recursive: true, force: true });
  }

  private followed(dir: string): FrameSet {
    let set = this.sets.get(dir);
    if (set === undefined) {
      // A name of its own: another process that takes the upload over later joins in its own file.
      const file = join(dir, `joined-${process.pid}-${randomBytes(4).toString('hex')}.zst.partial`);
      set = { join: new FrameJoin(file), compressing: new Map() };
      this.sets.set(dir, set);
      if (this.sets.size > MAX_FOLLOWED) {
        const [oldest, dropped] = this.sets.entries().next().value!;
        this.sets.delete(oldest);
        void this.stop(dropped);
      }
    }
    return set;
  }

  /** Compresses the frames below `count` of a NAR of (at least) `narSize` bytes that are neither joined, waiting nor underway. */
  private request(set: FrameSet, source: string, count: number, narSize: number): void {
    for (let index = set.join.appended; index < count; index++) {
      if (set.compressing.has(index) || set.join.holds(index)) continue;
      const { start, end } = frameRange(index, narSize);
      const run = this.cpu
        .run('compressNarFrame', { source, start, end, zstdLevel: this.zstdLevel })
        .then(
          (bytes) => set.join.offer(index, bytes),
          (e: unknown) => set.join.fail(e),
        )
        .finally(() => set.compressing.delete(index));
      set.compressing.set(index, run);
    }
  }

  private async stop(set: FrameSet): Promise<void> {
    set.join.fail(new Error('the frames were dropped'));
    await Promise.all(set.compressing.values());
    await set.join.discard();
  }
}
