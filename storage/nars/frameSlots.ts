// Shared memory the CPU pool writes compressed frames into (frameTasks.ts), reused frame after
// frame. A frame that came back in a buffer of its own (transferred) was external memory of the
// main thread's heap until a garbage collection found it dead, and V8 answers every 64 MB or so of
// that with a major collection of the whole server heap: measured, 11-16 of them (5-38 ms each on
// the event loop, more on V8's helper threads) per 520 MiB NAR. A slot is allocated once.
import { FRAME_BYTES, zstdCompressBound } from './narFrames.js';

/** zstd's worst case for a whole frame: every frame's bytes fit in a slot. */
export const FRAME_SLOT_BYTES = zstdCompressBound(FRAME_BYTES);

/** Spare slots are let go after this long without use: an idle server keeps none. */
const IDLE_MS = 30_000;

export class FrameSlots {
  private readonly spare: SharedArrayBuffer[] = [];
  /** Slots handed out: only these may come back, once (a slot in spare twice would go to two frames at once). */
  private readonly out = new Set<SharedArrayBuffer>();
  private idleTimer: NodeJS.Timeout | null = null;

  /** `max`: slots at most (FRAME_SLOT_BYTES each); past it a frame comes back in a buffer of its own. */
  constructor(private readonly max: number) {}

  get inUse(): number {
    return this.out.size;
  }

  take(): SharedArrayBuffer | undefined {
    if (this.spare.length === 0 && this.out.size >= this.max) return undefined;
    const slot = this.spare.pop() ?? new SharedArrayBuffer(FRAME_SLOT_BYTES);
    this.out.add(slot);
    return slot;
  }

  /** Only once nothing reads or writes the slot now. */
  give(slot: SharedArrayBuffer): void {
    if (!this.out.delete(slot)) return;
    this.spare.push(slot);
    this.idleTimer?.refresh();
    this.idleTimer ??= setTimeout(() => {
      this.spare.length = 0;
      this.idleTimer = null;
    }, IDLE_MS).unref();
  }

  /**
   * A slot never to be reused: its task failed, and a failed task's thread may still be writing
   * into it (piscina rejects a task before the thread it ran on has stopped).
   */
  drop(slot: SharedArrayBuffer): void {
    this.out.delete(slot);
  }
}
