// Which declared references actually occur in a NAR. Nix computes a path's references by scanning
// its NAR for the hash parts of candidate paths, so every genuine reference's 32-character hash
// part appears somewhere in the NAR bytes; a declared reference that does not is invented, and a
// signature would vouch for a closure that is not real. Omissions cannot be detected this way
// (the candidates are unknown), additions can.

// A hash part is 32 bytes: a match can straddle two chunks by at most 31 of them.
const OVERLAP = 31;

export class ReferenceScanner {
  private readonly pending = new Map<string, Buffer>();
  private tail: Buffer = Buffer.alloc(0);

  constructor(hashParts: Iterable<string>) {
    for (const hash of hashParts) this.pending.set(hash, Buffer.from(hash, 'latin1'));
  }

  /** Feed the NAR in order; found hashes stop being searched for, so the usual cost is nil. */
  push(chunk: Uint8Array): void {
    if (this.pending.size === 0) return;
    const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    const seam = this.tail.length > 0 ? Buffer.concat([this.tail, bytes.subarray(0, OVERLAP)]) : null;
    for (const [hash, needle] of this.pending) {
      if (bytes.indexOf(needle) >= 0 || (seam !== null && seam.indexOf(needle) >= 0)) this.pending.delete(hash);
    }
    // Keep the last 31 bytes of everything seen, copied: the producer may reuse its buffers.
    this.tail = bytes.length >= OVERLAP ? Buffer.from(bytes.subarray(bytes.length - OVERLAP)) : Buffer.concat([this.tail, bytes]).subarray(-OVERLAP);
  }

  /** Hash parts not seen so far, in the order they were given. */
  get missing(): string[] {
    return [...this.pending.keys()];
  }
}
