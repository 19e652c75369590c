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
import { FrameSlots } from './frameSlots.js';
import { frameCount, frameRange, FRAME_BYTES } from './narFrames.js';

/** Uploads followed at once; beyond it the oldest is dropped (its finalize compresses again). */
const MAX_FOLLOWED = 64;

/**
 * Frames compressed ahead of the join, per upload: compressed frames wait in memory for their
 * turn, so this bounds that memory (16 MiB of NAR each at most) when a whole NAR is compressed at
 * once (a finalize after a restart, a single-shot upload) onto a disk slower than the pool.
 */
const FRAMES_AHEAD = 8;

/**
 * Frame slots (frameSlots.ts; 16 MiB each) at most: an upload's frames in flight are the ones being
 * compressed (one per pool thread) and the few the join has not written yet.
 */
const FRAME_SLOTS = 6;

interface FrameSet {
  join: FrameJoin;
  /** frames being compressed, by index */
  compressing: Map<number, Promise<void>>;
  /** the staged file, and how many of its frames may be made: whole frames so far, all at finalize */
  source: string;
  count: number;
  narSize: number;
}

export class NarFrameSets {
  /** Uploads whose chunks are arriving; a set being finalized is not here (nothing may drop it). */
  private readonly sets = new Map<string, FrameSet>();
  private readonly slots = new FrameSlots(FRAME_SLOTS);

  constructor(
    private readonly cpu: CpuPool,
    private readonly zstdLevel: number,
  ) {}

  /** Frame slots held by frames not written yet: 0 whenever no frame is underway. */
  get slotsInUse(): number {
    return this.slots.inUse;
  }

  /** Starts compressing the whole frames below `staged` bytes that are neither joined nor underway; does not wait. */
  advance(dir: string, source: string, staged: number): void {
    let set = this.sets.get(dir);
    if (set?.join.failed) {
      // A frame or a write failed: its frames would be made again for nothing; start over.
      this.sets.delete(dir);
      void this.stop(set);
      set = undefined;
    }
    set ??= this.follow(dir, source);
    set.count = Math.floor(staged / FRAME_BYTES);
    set.narSize = staged;
    this.request(set);
  }

  /**
   * The stored file of the NAR's `narSize` staged bytes as `output`: what was compressed and joined
   * while the chunks arrived, the rest compressed now in parallel.
   */
  async stored(dir: string, source: string, narSize: number, output: string): Promise<{ fileHash: string; fileSize: number }> {
    let set = this.sets.get(dir);
    this.sets.delete(dir);
    if (set !== undefined && set.join.failed) {
      // A frame or a write failed in the background: start over once, from the staged file.
      await this.stop(set);
      set = undefined;
    }
    set ??= this.newSet(dir, source);
    set.count = frameCount(narSize);
    set.narSize = narSize;
    // Every frame compressed and appended: each one back or appended asks for the next (request).
    while (!set.join.failed && set.join.appended < set.count) {
      const appended = set.join.appended;
      this.request(set);
      await Promise.all(set.compressing.values());
      await set.join.idle(); // the appends the frames just back set off
      if (set.compressing.size === 0 && set.join.appended === appended && !set.join.failed) {
        set.join.fail(new Error(`the frames of ${dir} stopped at ${appended} of ${set.count}`)); // never seen; better than spinning
      }
    }
    try {
      return await set.join.finish(set.count, output);
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

  private follow(dir: string, source: string): FrameSet {
    const set = this.newSet(dir, source);
    this.sets.set(dir, set);
    if (this.sets.size > MAX_FOLLOWED) {
      const [oldest, dropped] = this.sets.entries().next().value!;
      this.sets.delete(oldest);
      void this.stop(dropped);
    }
    return set;
  }

  /**
   * Compresses the set's frames below its count that are neither joined, waiting nor underway, at
   * most FRAMES_AHEAD past the join; each one that comes back asks for the next.
   */
  private request(set: FrameSet): void {
    const until = Math.min(set.count, set.join.appended + FRAMES_AHEAD);
    for (let index = set.join.appended; index < until && !set.join.failed; index++) {
      if (set.compressing.has(index) || set.join.holds(index)) continue;
      const { start, end } = frameRange(index, set.narSize);
      const slot = this.slots.take();
      const run = this.cpu
        .run('compressNarFrame', { source: set.source, start, end, zstdLevel: this.zstdLevel, ...(slot === undefined ? {} : { output: slot }) })
        .then(
          (result) => {
            // With a slot the task answers the frame's length, without one its bytes.
            if (slot === undefined && typeof result !== 'number') return set.join.offer(index, result);
            if (slot !== undefined && typeof result === 'number' && result > 0 && result <= slot.byteLength) return set.join.offer(index, new Uint8Array(slot, 0, result));
            if (slot !== undefined) this.slots.drop(slot);
            set.join.fail(new Error(`frame ${index} of ${set.source} came back as ${typeof result === 'number' ? `a length of ${result}` : 'bytes'}, not as asked`));
          },
          (e: unknown) => {
            if (slot !== undefined) this.slots.drop(slot);
            set.join.fail(e);
          },
        )
        .finally(() => {
          set.compressing.delete(index);
          this.request(set);
        });
      set.compressing.set(index, run);
    }
  }

  /** A set of its own for the upload in `dir`, followed by no map. */
  private newSet(dir: string, source: string): FrameSet {
    // A name of its own: another process that takes the upload over later joins in its own file.
    const file = join(dir, `joined-${process.pid}-${randomBytes(4).toString('hex')}.zst.partial`);
    const frameJoin = new FrameJoin(file, () => this.request(set), (bytes) => {
      if (bytes.buffer instanceof SharedArrayBuffer) this.slots.give(bytes.buffer);
    });
    const set: FrameSet = { join: frameJoin, compressing: new Map(), source, count: 0, narSize: 0 };
    return set;
  }

  private async stop(set: FrameSet): Promise<void> {
    set.join.fail(new Error('the frames were dropped'));
    while (set.compressing.size > 0) await Promise.all(set.compressing.values());
    await set.join.discard();
  }
}

