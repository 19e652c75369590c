// Pushing store paths as NARs over /proto with the server's credit (docs/proto.md, "NAR push").
// The NAR is dumped straight from the store (narDump.ts, byte for byte `nix-store
// --dump`), cut into chunks of the negotiated size, and hashed on the way: the worker checks
// its own stream against the store's NarHash before it claims the push is complete.
import { createHash } from 'node:crypto';
import { sha256Nix32, type Message, type NarAbortCode, type PathInfo } from '../protocol/index.js';
import type { ProtoConnection } from './connection.js';
import { dumpNar } from './narDump.js';
import { realStorePath } from './ownStore.js';

export class NarPushFailed extends Error {
  override readonly name = 'NarPushFailed';
  constructor(readonly code: NarAbortCode | 'closed', message: string) {
    super(message);
  }
}

type Ending = { status: 'stored' | 'present' } | { abort: NarPushFailed };

class Transfer {
  credit = 0;
  ending: Ending | undefined;
  private wake: (() => void) | undefined;

  notify(): void {
    this.wake?.();
  }

  /** Waits until `ready()` holds or the transfer ended; false on timeout. */
  async until(ready: () => boolean, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!ready() && !this.ending) {
      const left = deadline - Date.now();
      if (left <= 0) return false;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = undefined;
    }
    return true;
  }
}

/** Cuts a stream of arbitrary pieces into chunks of exactly `size` bytes (the last may be shorter). */
export async function* rechunk(source: AsyncIterable<Uint8Array>, size: number): AsyncGenerator<Buffer> {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  for await (const piece of source) {
    let rest = Buffer.from(piece.buffer, piece.byteOffset, piece.byteLength);
    while (pendingBytes + rest.length >= size) {
      const take = size - pendingBytes;
      pending.push(rest.subarray(0, take));
      yield Buffer.concat(pending, size);
      rest = rest.subarray(take);
      pending = [];
      pendingBytes = 0;
    }
    if (rest.length > 0) {
      // Copied: dumpNar may reuse nothing, but a source is free to.
      pending.push(Buffer.from(rest));
      pendingBytes += rest.length;
    }
  }
  if (pendingBytes > 0) yield Buffer.concat(pending, pendingBytes);
}

export class NarPusher {
  private nextId = 0;
  private readonly transfers = new Map<number, Transfer>();

  constructor(
    private readonly connection: ProtoConnection,
    private readonly chunkBytes: number,
    private readonly sendChunkTimeoutSecs: number,
    /** worker.storeRoot: the paths' files are under it (worker/ownStore.ts); null: where their names say */
    private readonly storeRoot: string | null = null,
  ) {}

  /** Takes the server's narCredit / narPushAck / narAbort; false for any other message. */
  handle(message: Message): boolean {
    if (message.t !== 'narCredit' && message.t !== 'narPushAck' && message.t !== 'narAbort') return false;
    const transfer = this.transfers.get(message.transferId);
    if (!transfer) return true; // a late answer to a transfer that already ended
    if (message.t === 'narCredit') transfer.credit += message.chunks;
    else if (message.t === 'narPushAck') transfer.ending = { status: message.status };
    else transfer.ending = { abort: new NarPushFailed(message.code, `the server aborted the push: ${message.reason}`) };
    transfer.notify();
    return true;
  }

  /** The connection is gone: every open transfer fails. */
  failAll(reason: string): void {
    for (const transfer of this.transfers.values()) {
      transfer.ending ??= { abort: new NarPushFailed('closed', reason) };
      transfer.notify();
    }
  }

  async push(jobId: string, info: PathInfo, targetCaches: readonly string[], signal?: AbortSignal): Promise<'stored' | 'present'> {
    const transferId = this.nextId++ % 0x1_0000_0000;
    const transfer = new Transfer();
    this.transfers.set(transferId, transfer);
    const timeoutMs = this.sendChunkTimeoutSecs * 1000;
    const abort = (code: NarAbortCode, reason: string): never => {
      this.connection.send({ t: 'narAbort', transferId, code, reason });
      throw new NarPushFailed(code, reason);
    };
    const ended = (): 'stored' | 'present' => {
      const ending = transfer.ending!;
      if ('abort' in ending) throw ending.abort;
      return ending.status;
    };
    try {
      if (!this.connection.send({ t: 'narPushStart', transferId, jobId, info, targetCaches: [...targetCaches] })) {
        throw new NarPushFailed('closed', 'the /proto connection is closed');
      }
      const hash = createHash('sha256');
      let size = 0;
      let seq = 0;
      for await (const chunk of rechunk(dumpNar(realStorePath(this.storeRoot, info.path)), this.chunkBytes)) {
        if (signal?.aborted) abort('cancelled', 'the job was cancelled');
        if (!(await transfer.until(() => transfer.credit > 0, timeoutMs))) abort('timeout', `no credit from the server within ${this.sendChunkTimeoutSecs} s`);
        if (transfer.ending) return ended();
        transfer.credit--;
        hash.update(chunk);
        size += chunk.length;
        const sent = this.connection.sendDrained({ t: 'narChunk', transferId, seq: seq++, data: chunk });
        const drained = await Promise.race([sent.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), timeoutMs).unref())]);
        if (!drained) abort('timeout', `a chunk waited more than ${this.sendChunkTimeoutSecs} s for the socket to drain`);
      }
      const narHash = sha256Nix32(hash.digest());
      if (narHash !== info.narHash || size !== info.narSize) {
        abort('verify_failed', `the dump of ${info.path} is ${size} bytes with ${narHash}; the store says ${info.narSize} bytes with ${info.narHash}`);
      }
      this.connection.send({ t: 'narPushEnd', transferId, chunks: seq, narHash, narSize: size });
      // The server verifies and stores the whole NAR before it answers; allow it more than one chunk's time.
      if (!(await transfer.until(() => false, timeoutMs * 10))) abort('timeout', `no answer to narPushEnd within ${this.sendChunkTimeoutSecs * 10} s`);
      return ended();
    } finally {
      this.transfers.delete(transferId);
    }
  }
}
