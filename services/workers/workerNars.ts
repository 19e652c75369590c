// NARs a worker pushes over /proto into a job's target caches (docs/proto.md, "NAR push"):
// narPushStart → present if every target cache holds the path, else the room check and credit;
// chunks go to a temporary file of the NAR staging area, one credit back per chunk written (so a
// slow disk slows the worker, not the server's memory); narPushEnd → with an upload permit, the
// ingest front door (narIngest.ts) puts it into each cache, which verifies NarHash/NarSize, signs
// and stores (DESIGN.md: Nix never checks FileHash, so the server verifies every ingest).
// A transfer that goes upload.leaseIdleSecs without a chunk loses its staging file and room
// and hears narAbort timeout, so a stalled worker holds nothing; the worker's job retries.
import { open, type FileHandle } from 'node:fs/promises';
import type { Logger } from 'pino';
import type { Sql } from 'postgres';
import type { Clock } from '../../supervisors/index.js';
import { isApiError, jobRootSpan, type MessageOf, type Narinfo } from '../../protocol/index.js';
import { activeCachesNamed } from '../../storage/index.js';
import type { IngestTarget, NarIngest } from '../caches/index.js';
import type { ConnectedWorker } from './workerConnections.js';

const INITIAL_CREDIT = 4;

interface Transfer {
  worker: ConnectedWorker;
  start: MessageOf<'narPushStart'>;
  targets: IngestTarget[];
  file: string;
  handle: FileHandle;
  bytes: number;
  seq: number;
  writing: Promise<void>;
  failed: string | null;
  /** when the last chunk (or the start) arrived, in the clock's milliseconds */
  lastDataAt: number;
}

export interface WorkerNarsDeps {
  sql: Sql;
  /** admission, the room check (a push into a cache it would not fit is refused before its first chunk), ingest and events */
  ingest: NarIngest;
  /** nar.maxUploadSize */
  maxUploadSize: number;
  /** server faults of a push: the worker hears io_error, the cause goes here */
  log: Logger;
  /** upload.leaseIdleSecs */
  leaseIdleSecs: number;
  clock: Clock;
}

type Abort = Pick<MessageOf<'narAbort'>, 'code' | 'reason'>;

/** What the worker hears of a failed push: its own problems by name; a server fault only as io_error, logged. */
function abortOf(error: unknown): Abort | null {
  if (!isApiError(error) || error.status >= 500) return null;
  return { code: error.status === 413 ? 'too_large' : 'verify_failed', reason: error.message };
}

const baseName = (path: string) => path.slice(path.lastIndexOf('/') + 1);

export function narinfoOf(info: MessageOf<'narPushStart'>['info']): Narinfo {
  return {
    storePath: info.path, url: '', compression: 'none', narHash: info.narHash, narSize: info.narSize,
    references: info.references.map(baseName).sort(), sigs: [],
    ...(info.deriver ? { deriver: baseName(info.deriver) } : {}), ...(info.ca ? { ca: info.ca } : {}),
  };
}

export class WorkerNars {
  private readonly transfers = new Map<string, Transfer>();
  private leaseSweep: NodeJS.Timeout | null = null;

  constructor(private readonly deps: WorkerNarsDeps) {}

  /** `allowed`: the writable caches of the worker's running jobs (names). */
  async start(worker: ConnectedWorker, message: MessageOf<'narPushStart'>, allowed: ReadonlySet<string>): Promise<void> {
    const send = worker.link.send;
    const abort = (code: MessageOf<'narAbort'>['code'], reason: string) => send({ t: 'narAbort', transferId: message.transferId, code, reason });
    const refused = message.targetCaches.filter((c) => !allowed.has(c));
    if (refused.length > 0) return abort('rejected', `no running job of this worker may push into ${refused.join(', ')}`);
    if (message.info.narSize > this.deps.maxUploadSize) {
      return abort('too_large', `the NAR has ${message.info.narSize} bytes, more than nar.maxUploadSize (${this.deps.maxUploadSize})`);
    }
    const caches = await activeCachesNamed(this.deps.sql, message.targetCaches);
    const info = narinfoOf(message.info);
    const targets: IngestTarget[] = [];
    for (const cache of caches) {
      try {
        // A cache that holds the path already (a retry) needs neither room nor the bytes.
        if ((await this.deps.ingest.demandRoomFor(cache, info)) === null) targets.push(cache);
      } catch (error) {
        const refusal = this.refusal(error, message.transferId, cache.name, false);
        return abort(refusal.code, refusal.reason);
      }
    }
    if (targets.length === 0) return send({ t: 'narPushAck', transferId: message.transferId, status: 'present' });
    const file = await this.deps.ingest.temporaryFile();
    const handle = await open(file, 'w');
    this.transfers.set(this.key(worker, message.transferId), {
      worker, start: message, targets, file, handle, bytes: 0, seq: 0, writing: Promise.resolve(), failed: null, lastDataAt: this.now(),
    });
    this.armLeaseSweep();
    send({ t: 'narCredit', transferId: message.transferId, chunks: INITIAL_CREDIT });
  }

  chunk(worker: ConnectedWorker, message: MessageOf<'narChunk'>): void {
    const transfer = this.transfers.get(this.key(worker, message.transferId));
    if (!transfer) return worker.link.send({ t: 'narAbort', transferId: message.transferId, code: 'protocol', reason: 'no open transfer with this id' });
    if (message.seq !== transfer.seq || transfer.bytes + message.data.length > transfer.start.info.narSize) {
      void this.drop(worker, message.transferId);
      return worker.link.send({ t: 'narAbort', transferId: message.transferId, code: 'protocol', reason: `chunk ${message.seq} is out of order or past the NAR's size` });
    }
    transfer.seq++;
    transfer.bytes += message.data.length;
    transfer.lastDataAt = this.now();
    const data = Buffer.from(message.data);
    transfer.writing = transfer.writing.then(async () => {
      if (transfer.failed) return;
      try {
        await transfer.handle.write(data);
        worker.link.send({ t: 'narCredit', transferId: message.transferId, chunks: 1 });
      } catch (error) {
        transfer.failed = error instanceof Error ? error.message : String(error);
      }
    });
  }

  async end(worker: ConnectedWorker, message: MessageOf<'narPushEnd'>): Promise<void> {
    const key = this.key(worker, message.transferId);
    const transfer = this.transfers.get(key);
    if (!transfer) return worker.link.send({ t: 'narAbort', transferId: message.transferId, code: 'protocol', reason: 'no open transfer with this id' });
    this.transfers.delete(key);
    await transfer.writing;
    await transfer.handle.close();
    try {
      if (transfer.failed) {
        this.deps.log.error({ transferId: message.transferId, reason: transfer.failed }, 'writing a pushed NAR to its temporary file failed');
        return worker.link.send({ t: 'narAbort', transferId: message.transferId, code: 'io_error', reason: 'the server could not write the NAR; its log has the cause' });
      }
      const failure = await this.stored(transfer, message.transferId);
      if (failure) return worker.link.send({ t: 'narAbort', transferId: message.transferId, ...failure });
      worker.link.send({ t: 'narPushAck', transferId: message.transferId, status: 'stored' });
    } finally {
      await this.deps.ingest.forget(transfer.file);
    }
  }

  /**
   * Puts the pushed NAR into every target with one upload permit, held while it is verified,
   * compressed and stored (upload.concurrency, upload.bytesBudget; the credit window already
   * bounds the transfer itself). The abort to answer, or null when every target has it.
   */
  private async stored(transfer: Transfer, transferId: number): Promise<Abort | null> {
    const info = narinfoOf(transfer.start.info);
    try {
      return await this.deps.ingest.admitted(info.narSize, 'wait', undefined, async () => {
        for (const target of transfer.targets) {
          try {
            await this.deps.ingest.ingest(target, info, { file: transfer.file }, jobRootSpan(transfer.start.jobId));
          } catch (error) {
            return this.refusal(error, transferId, target.name, true);
          }
        }
        return null;
      });
    } catch (error) {
      return this.refusal(error, transferId, transfer.targets.map((t) => t.name).join(', '), true); // no permit
    }
  }

  /** The abort a failed push gets; a server fault is logged with its cause and answered io_error. */
  private refusal(error: unknown, transferId: number, cache: string, named: boolean): Abort {
    const refused = abortOf(error);
    if (refused) return { code: refused.code, reason: (named ? `${cache}: ${refused.reason}` : refused.reason).slice(0, 1000) };
    this.deps.log.error({ err: error, transferId, cache }, 'storing a pushed NAR failed');
    return { code: 'io_error', reason: `${cache}: the server could not store the NAR; its log has the cause` };
  }

  abort(worker: ConnectedWorker, transferId: number): Promise<void> {
    return this.drop(worker, transferId);
  }

  /** The worker is gone: its open transfers are thrown away. */
  async lost(worker: ConnectedWorker): Promise<void> {
    const prefix = `${worker.connectionId}/`;
    for (const key of [...this.transfers.keys()].filter((k) => k.startsWith(prefix))) {
      await this.drop(worker, Number(key.slice(prefix.length)));
    }
  }

  /**
   * Ends every transfer that went upload.leaseIdleSecs without data: narAbort timeout, staging
   * file gone. Runs on a timer while transfers are open; returns how many ended.
   */
  async expireIdle(): Promise<number> {
    const cutoff = this.now() - this.deps.leaseIdleSecs * 1000;
    const idle = [...this.transfers.values()].filter((t) => t.lastDataAt < cutoff);
    for (const transfer of idle) {
      const transferId = transfer.start.transferId;
      transfer.worker.link.send({
        t: 'narAbort', transferId, code: 'timeout',
        reason: `no data for more than ${this.deps.leaseIdleSecs} s (upload.leaseIdleSecs); push again`,
      });
      await this.drop(transfer.worker, transferId);
    }
    return idle.length;
  }

  private armLeaseSweep(): void {
    if (this.leaseSweep) return;
    const everyMs = Math.min(5_000, (this.deps.leaseIdleSecs * 1000) / 2);
    this.leaseSweep = setInterval(() => {
      void this.expireIdle().catch((error: unknown) => this.deps.log.error({ err: error }, 'expiring idle NAR pushes failed'));
      if (this.transfers.size === 0 && this.leaseSweep) {
        clearInterval(this.leaseSweep);
        this.leaseSweep = null;
      }
    }, everyMs);
    this.leaseSweep.unref();
  }

  private now(): number {
    return this.deps.clock.now().getTime();
  }

  private async drop(worker: ConnectedWorker, transferId: number): Promise<void> {
    const key = this.key(worker, transferId);
    const transfer = this.transfers.get(key);
    if (!transfer) return;
    this.transfers.delete(key);
    await transfer.writing;
    await transfer.handle.close().catch(() => undefined);
    await this.deps.ingest.forget(transfer.file);
  }

  private key(worker: ConnectedWorker, transferId: number): string {
    return `${worker.connectionId}/${transferId}`;
  }
}
