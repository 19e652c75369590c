// upload.leaseIdleSecs for NARs sent over SSH (AddToStoreNar of ssh-ng and ssh://): a NAR is
// read while its upload permit is held, so a client that stops sending mid-NAR would keep that
// permit, and every upload queued behind it, for as long as it keeps the connection open. As for
// /proto pushes (services/workers/workerNars.ts), a sweep reads the clock: a NAR whose next chunk
// has been awaited for longer than the lease throws SessionEnds, its staging file goes and its
// permit comes back; the session ends, since the rest of the NAR is still on the wire.
import type { Clock } from '../../supervisors/index.js';
import { SessionEnds } from './sessionErrors.js';

export interface NarLeasesDeps {
  /** upload.leaseIdleSecs */
  idleSecs: number;
  clock: Clock;
}

interface Lease {
  /** since when the next chunk is awaited (clock milliseconds); null while the consumer has a chunk */
  waitingSince: number | null;
  expire(reason: Error): void;
}

export class NarLeases {
  private readonly open = new Set<Lease>();
  private sweep: NodeJS.Timeout | null = null;

  constructor(private readonly deps: NarLeasesDeps) {}

  /** NARs read under a lease now (each until it ends, expires or its reader lets it go). */
  get holding(): number {
    return this.open.size;
  }

  /** `source`'s chunks, until it ends or the lease expires (SessionEnds). */
  async *leased(source: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
    const chunks = source[Symbol.asyncIterator]();
    let expire: (reason: Error) => void = () => undefined;
    const expired = new Promise<never>((_resolve, reject) => {
      expire = reject;
    });
    expired.catch(() => undefined); // raced below; unobserved when the NAR ends in time
    const lease: Lease = { waitingSince: null, expire };
    this.open.add(lease);
    this.armSweep();
    let pending = false;
    try {
      for (;;) {
        lease.waitingSince = this.now();
        pending = true;
        const next = await Promise.race([chunks.next(), expired]);
        pending = false;
        lease.waitingSince = null;
        if (next.done === true) return;
        yield next.value;
      }
    } finally {
      this.open.delete(lease);
      // A read still pending stays with the session, which ends; a consumer that stopped early lets the source go.
      if (!pending) await chunks.return?.();
    }
  }

  /** Ends every NAR whose next chunk was awaited longer than upload.leaseIdleSecs; how many ended. */
  expireIdle(): number {
    const cutoff = this.now() - this.deps.idleSecs * 1000;
    let ended = 0;
    for (const lease of this.open) {
      if (lease.waitingSince === null || lease.waitingSince >= cutoff) continue;
      this.open.delete(lease);
      lease.expire(new SessionEnds(`no NAR data for more than ${this.deps.idleSecs} s (upload.leaseIdleSecs); the upload permit is given back, copy again`));
      ended++;
    }
    return ended;
  }

  private armSweep(): void {
    if (this.sweep !== null) return;
    this.sweep = setInterval(() => {
      this.expireIdle();
      if (this.open.size === 0 && this.sweep !== null) {
        clearInterval(this.sweep);
        this.sweep = null;
      }
    }, Math.min(5_000, (this.deps.idleSecs * 1000) / 2));
    this.sweep.unref();
  }

  private now(): number {
    return this.deps.clock.now().getTime();
  }
}
