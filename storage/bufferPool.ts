// Buffers of one size kept for reuse between streams. Streaming large bodies through fresh 1 MiB
// buffers makes V8 answer the external memory with major garbage collections (bench/HISTORY.md,
// binary-cache third pass); a stream that is done with its buffers hands them back here instead.

export class BufferPool {
  private readonly spare: Buffer[] = [];

  constructor(
    readonly bufferBytes: number,
    /** buffers kept at most; beyond that, handed-back ones are left to the garbage collector */
    private readonly keep: number,
  ) {}

  take(): Buffer {
    return this.spare.pop() ?? Buffer.allocUnsafeSlow(this.bufferBytes);
  }

  /** Only a buffer no one reads or writes any more. */
  give(buffer: Buffer): void {
    if (buffer.length === this.bufferBytes && this.spare.length < this.keep) this.spare.push(buffer);
  }
}

/** The 1 MiB buffers of streamed blob reads and of request bodies that reuse their pieces (64 MiB kept at most). */
export const mebibyteBuffers = new BufferPool(1 << 20, 64);
