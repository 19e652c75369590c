// The compressed frames of staged NARs (narFrames.ts), made in the CPU pool in the background as a
// chunked upload's bytes become final, so finalize finds most of the compression already done. A
// frame file is written under a temporary name and renamed, and covers only bytes the staged row
// counts, which never change, so a frame file that exists is right even after a restart.
import { rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { CpuPool } from '../cpuPool.js';
import { frameCount, frameRange, FRAME_BYTES } from './narFrames.js';

export class NarFrameSets {
  private readonly running = new Map<string, Promise<unknown>>();

  constructor(
    private readonly cpu: CpuPool,
    private readonly zstdLevel: number,
  ) {}

  /** Starts compressing every whole frame below `staged` bytes that is neither done nor underway; does not wait. */
  advance(dir: string, source: string, staged: number): void {
    for (let index = 0; (index + 1) * FRAME_BYTES <= staged; index++) {
      const output = join(dir, `${index}.zst`);
      if (this.running.has(output)) continue;
      void stat(output).then(
        () => undefined,
        () => {
          if (!this.running.has(output)) this.compress(output, source, index, (index + 1) * FRAME_BYTES).catch(() => undefined);
        },
      );
    }
  }

  /** Every frame of a NAR of `narSize` bytes, compressing (in parallel) what is missing; the files in order. */
  async complete(dir: string, source: string, narSize: number): Promise<string[]> {
    const frames = Array.from({ length: frameCount(narSize) }, (_, index) => join(dir, `${index}.zst`));
    await Promise.all(
      frames.map(async (output, index) => {
        // A background run that failed is simply tried again here.
        await this.running.get(output)?.catch(() => undefined);
        if (await stat(output).then(() => true, () => false)) return;
        await this.compress(output, source, index, narSize);
      }),
    );
    return frames;
  }

  /** Removes the frames of an upload once it is ingested or abandoned. */
  async discard(dir: string): Promise<void> {
    const prefix = `${dir}/`;
    await Promise.all([...this.running].filter(([file]) => file.startsWith(prefix)).map(([, run]) => run.catch(() => undefined)));
    await rm(dir, { recursive: true, force: true });
  }

  private compress(output: string, source: string, index: number, narSize: number): Promise<unknown> {
    const { start, end } = frameRange(index, narSize);
    const run = this.cpu.run('compressNarFrame', { source, start, end, output, zstdLevel: this.zstdLevel }).finally(() => this.running.delete(output));
    this.running.set(output, run);
    return run;
  }
}
