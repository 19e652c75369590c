// The check pass of one chunked upload (parse, NarHash, listing) fed its bytes in order as they
// arrive: the push parser and the hash take any chunking. stagedChecks.ts says where it runs.
import { createHash, type Hash } from 'node:crypto';
import { NarListingBuilder, NarParser, renderNarListing, sha256Nix32 } from '../../protocol/index.js';

export interface CheckedNar {
  narHash: string;
  narSize: number;
  listing: string;
}

export class StagedCheck {
  /** NAR bytes pushed so far. */
  position = 0;
  private readonly hash: Hash = createHash('sha256');
  private readonly listing = new NarListingBuilder();
  private readonly parser = new NarParser(this.listing, {});
  private broken = false;
  private finished: CheckedNar | null = null;

  push(chunk: Uint8Array): void {
    this.position += chunk.byteLength;
    if (this.broken) return;
    this.finished = null;
    try {
      this.parser.push(chunk);
      this.hash.update(chunk);
    } catch {
      // Not a NAR: finalize runs the full pass, which reports the fault as always.
      this.broken = true;
    }
  }

  /** The NAR's digest and listing when exactly `narSize` well-formed bytes were pushed; null otherwise. */
  result(narSize: number): CheckedNar | null {
    if (this.broken || this.position !== narSize || !this.parser.done) return null;
    this.finished ??= {
      // A copy: the state stays usable for another finalize (a narinfo corrected after a refusal).
      narHash: sha256Nix32(this.hash.copy().digest()),
      narSize: this.parser.position,
      listing: renderNarListing(this.listing.listing),
    };
    return this.finished;
  }
}
