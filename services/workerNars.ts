import { mkdir, open, rm, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import type { Sql } from 'postgres';
import type { MessageOf, Narinfo } from '../protocol/index.js';
import type { Events, NarStorage, SecretBox } from '../storage/index.js';
import { openCacheKey } from './cacheKeys.js';
import type { CacheStorageLimits } from './cacheStorage.js';
import { announceAddedNar } from './narUploadEvents.js';
import type { ConnectedWorker } from './workerConnections.js';

// NARs a worker pushes over /proto into a job's target caches (docs/proto.md, "NAR push"):
// narPushStart → present if every target cache holds the path, else credit; chunks go to a
// temporary file, one credit back per chunk written (so a slow disk slows the worker, not the
// server's memory); narPushEnd → ingest into each cache, which verifies NarHash/NarSize, signs
// and stores (DESIGN.md: Nix never checks FileHash, so the server verifies every ingest).

const INITIAL_CREDIT = 4;

interface Target {
  id: string;
  name: string;
  signingKey: ReturnType<typeof openCacheKey>;
}

interface Transfer {
  start: MessageOf<'narPushStart'>;
  targets: Target[];
  file: string;
  handle: FileHandle;
  bytes: number;
  seq: number;
  writing: Promise<void>;
  failed: string | null;
}

export interface WorkerNarsDeps {
  sql: Sql;
  nars: NarStorage;
  secretBox: SecretBox;
  stagingDir: string;
  /** nar.maxUploadSize */
  maxUploadSize: number;
  /** a push into a cache it would not fit is refused before its first chunk (like REST uploads: 413 cache_full) */
  storageLimits: CacheStorageLimits;
  /** cache.nar.upload and its live companions for each path a push adds */
  events: Events;
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
  private sequence = 0;

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
    const rows = await this.deps.sql<{ id: string; name: string; key_name: string; secret_key: Buffer }[]>`
      select id, name, key_name, secret_key from caches where name = any(${message.targetCaches}) and active`;
    const info = narinfoOf(message.info);
    const targets: Target[] = [];
    for (const row of rows) {
      if (await this.deps.nars.uploads.held(row.id, info)) continue;
      try {
        await this.deps.storageLimits.demandRoom(row, info.narSize);
      } catch (error) {
        return abort('too_large', error instanceof Error ? error.message : String(error));
      }
      targets.push({ id: row.id, name: row.name, signingKey: openCacheKey(this.deps.secretBox, row) });
    }
    if (targets.length === 0) return send({ t: 'narPushAck', transferId: message.transferId, status: 'present' });
    await mkdir(this.deps.stagingDir, { recursive: true });
    const file = join(this.deps.stagingDir, `${process.pid}-${++this.sequence}.nar`);
    const handle = await open(file, 'w');
    this.transfers.set(this.key(worker, message.transferId), {
      start: message, targets, file, handle, bytes: 0, seq: 0, writing: Promise.resolve(), failed: null,
    });
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
      if (transfer.failed) return worker.link.send({ t: 'narAbort', transferId: message.transferId, code: 'io_error', reason: transfer.failed.slice(0, 500) });
      const info = narinfoOf(transfer.start.info);
      for (const target of transfer.targets) {
        try {
          const outcome = await this.deps.nars.uploads.ingestFile({ cacheId: target.id, signingKey: target.signingKey, info, file: transfer.file, compression: 'none' });
          if (outcome.status === 'added') {
            await announceAddedNar(this.deps.events, {
              cache: { id: target.id, name: target.name, keyName: target.signingKey.name },
              storePath: outcome.storePath, narHash: outcome.narHash, narSize: outcome.narSize, fileHash: outcome.fileHash, fileSize: outcome.fileSize,
            });
          }
        } catch (error) {
          const reason = error instanceof Error ? error.message : String(error);
          return worker.link.send({ t: 'narAbort', transferId: message.transferId, code: 'verify_failed', reason: `${target.name}: ${reason}`.slice(0, 1000) });
        }
      }
      worker.link.send({ t: 'narPushAck', transferId: message.transferId, status: 'stored' });
    } finally {
      await rm(transfer.file, { force: true });
    }
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

  private async drop(worker: ConnectedWorker, transferId: number): Promise<void> {
    const key = this.key(worker, transferId);
    const transfer = this.transfers.get(key);
    if (!transfer) return;
    this.transfers.delete(key);
    await transfer.writing;
    await transfer.handle.close().catch(() => undefined);
    await rm(transfer.file, { force: true });
  }

  private key(worker: ConnectedWorker, transferId: number): string {
    return `${worker.connectionId}/${transferId}`;
  }
}
