// Follows the frame structure of zstd data (RFC 8878, section 3.1) without decompressing it,
// to tell whether the input ended on a frame boundary. node:zlib's zstd decoder ends quietly
// on a truncated frame, so without this a cut-off upload would look like a short file.
const ZSTD_MAGIC = 0xfd2fb528;
const SKIPPABLE_MASK = 0xfffffff0;
const SKIPPABLE_MAGIC = 0x184d2a50;

type Skipping = 'block' | 'lastBlock' | 'checksum' | 'skippableFrame';

const enum State {
  Magic,
  FrameHeader,
  SkippableSize,
  BlockHeader,
  Skip,
}

export class ZstdFrameTracker {
  private state = State.Magic;
  private header = new Uint8Array(18);
  private filled = 0;
  private need = 4;
  private skip = 0;
  /** What the bytes being skipped are, so we know what follows them. */
  private skipping: Skipping = 'block';
  private checksum = false;
  private frameEnded = false;
  /** Bytes seen, for error messages. */
  position = 0;

  /** Returns a reason when the data cannot be zstd, undefined while it still can. */
  push(chunk: Uint8Array): string | undefined {
    for (let at = 0; at < chunk.length; ) {
      const step = this.scan(chunk, at);
      if (typeof step === 'string') return step;
      at = step.end;
    }
    return undefined;
  }

  /**
   * Reads `chunk` from `start` up to its end or to the end of a frame, whichever comes first,
   * so a caller can hand each frame to its own decoder (node:zlib decodes only the first).
   */
  scan(chunk: Uint8Array, start: number): { end: number; frameEnded: boolean } | string {
    let i = start;
    this.frameEnded = false;
    while (i < chunk.length && !this.frameEnded) {
      if (this.state === State.Skip) {
        const take = Math.min(this.skip, chunk.length - i);
        i += take;
        this.position += take;
        this.skip -= take;
        if (this.skip === 0) this.afterSkip();
        continue;
      }
      const take = Math.min(this.need - this.filled, chunk.length - i);
      this.header.set(chunk.subarray(i, i + take), this.filled);
      this.filled += take;
      i += take;
      this.position += take;
      if (this.filled < this.need) continue;
      this.filled = 0;
      const problem = this.headerDone();
      if (problem) return problem;
    }
    return { end: i, frameEnded: this.frameEnded };
  }

  /** True when the data seen so far ends exactly after a whole frame. */
  get complete(): boolean {
    return this.state === State.Magic && this.filled === 0 && this.position > 0;
  }

  private headerDone(): string | undefined {
    const h = this.header;
    switch (this.state) {
      case State.Magic: {
        const magic = (h[0]! | (h[1]! << 8) | (h[2]! << 16) | (h[3]! << 24)) >>> 0;
        if ((magic & SKIPPABLE_MASK) === SKIPPABLE_MAGIC) return this.expect(State.SkippableSize, 4);
        if (magic !== ZSTD_MAGIC) return `no zstd frame magic at byte ${this.position - 4}`;
        // The descriptor byte alone tells how long the rest of the header is.
        return this.expect(State.FrameHeader, 1);
      }
      case State.FrameHeader: {
        if (this.need === 1) {
          const d = h[0]!;
          const singleSegment = (d >> 5) & 1;
          const fcsFlag = d >> 6;
          const fcsBytes = fcsFlag === 0 ? singleSegment : [0, 2, 4, 8][fcsFlag]!;
          const dictBytes = [0, 1, 2, 4][d & 3]!;
          this.checksum = ((d >> 2) & 1) === 1;
          const rest = (singleSegment ? 0 : 1) + dictBytes + fcsBytes;
          if (rest === 0) return this.expect(State.BlockHeader, 3);
          this.need = 1 + rest;
          this.header[0] = d;
          this.filled = 1;
          return undefined;
        }
        return this.expect(State.BlockHeader, 3);
      }
      case State.SkippableSize:
        this.skip = (h[0]! | (h[1]! << 8) | (h[2]! << 16)) + h[3]! * 0x100_0000;
        return this.skipNext('skippableFrame');
      case State.BlockHeader: {
        const value = h[0]! | (h[1]! << 8) | (h[2]! << 16);
        const type = (value >> 1) & 3;
        if (type === 3) return `reserved block type at byte ${this.position - 3}`;
        // An RLE block stores its one repeated byte; raw and compressed blocks their size.
        this.skip = type === 1 ? 1 : value >>> 3;
        return this.skipNext((value & 1) === 1 ? 'lastBlock' : 'block');
      }
      default:
        return undefined;
    }
  }

  private skipNext(what: Skipping): undefined {
    this.skipping = what;
    this.state = State.Skip;
    if (this.skip === 0) this.afterSkip();
    return undefined;
  }

  private afterSkip(): void {
    if (this.skipping === 'block') {
      this.expect(State.BlockHeader, 3);
    } else if (this.skipping === 'lastBlock' && this.checksum) {
      this.skip = 4;
      this.skipping = 'checksum';
    } else {
      this.frameEnded = true;
      this.expect(State.Magic, 4);
    }
  }

  private expect(state: State, need: number): undefined {
    this.state = state;
    this.need = need;
    this.filled = 0;
    return undefined;
  }
}
