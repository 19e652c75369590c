// Staged uploads: REST chunks appended at an offset, `nix copy` NAR files put whole, and the
// finalize step that ingests them. The row is the truth about how many bytes count; the file sits
// under <baseDir>/staging, which several server processes on one database may share. Nothing here
// checks permissions (services do).
//
// One request at a time works on a staged upload: in this process a KeyedLocks entry refuses a
// second one without a query, and across processes the row's claim does (`writer`, migration
// 0016): the lease key of the process working on it, taken with one conditional UPDATE (free, its
// own, or its holder's lease gone: a process that died mid-request blocks nobody) and given up
// when the request ends. A refused claim is upload_in_progress (409) and touches nothing, so the
// staged bytes never change under another process's check pass or frame compression.
import { createReadStream } from 'node:fs';
import { mkdir, rename, rm, stat, truncate } from 'node:fs/promises';
import { dirname } from 'node:path';
import { storePathHashPart, type Narinfo, type SigningKey } from '../../protocol/index.js';
import { heldOutcome, holdsExactly } from './heldCopy.js';
import { discardPrepared, ingestIntoCache, prepareIngest, type IngestDeps, type PreparedIngest } from './ingest.js';
import { commitIngestBatch } from './commitIngestBatch.js';
import type { IngestOutcome } from './ingestOutcome.js';
import type { CrashPoints } from './crashPoints.js';
import { KeyedLocks } from './keyedLocks.js';
import type { NarReads } from './narReads.js';
import type { CheckedNar } from './stagedCheck.js';
import type { StagedChecks } from './stagedChecks.js';
import { appendStagedBytes, writeStagedFile } from './stagingFile.js';
import {
  advanceStagedUpload,
  claimStagedUpload,
  deleteStagedUpload,
  findHeldPath,
  findStagedUpload,
  recordStagedNarinfo,
  releaseStagedUpload,
  replaceStagedUpload,
  startStagedUpload,
  type StagedUploadRow,
} from './sql/index.js';
import { UploadProblem } from './uploadProblem.js';

export interface NarUploadsDeps extends IngestDeps {
  reads: NarReads;
  /** the check pass of chunked uploads, run as their chunks arrive */
  checks: StagedChecks;
  /** nar.maxUploadSize */
  maxUploadSize: number;
  /** this process's instance lease key (storage/db/advisoryLocks.ts): the claim it puts on the uploads it works on */
  leaseKey: number;
  /** the crash test's hold on finalize's steps (crashPoints.ts) */
  crashPoints?: CrashPoints;
}

export interface FinalizeRequest {
  cacheId: string;
  /** the store path's hash part (REST) or "nar/<file name>" (nix copy) */
  uploadKey: string;
  signingKey: SigningKey;
  info: Narinfo;
  /** the narinfo as the client sent it, kept on the row while the upload is unfinished */
  submitted?: unknown;
}

export interface NarUploads {
  staged(cacheId: string, uploadKey: string): Promise<StagedUploadRow | null>;
  /** Appends a chunk at `offset`; the bytes now staged. */
  appendChunk(cacheId: string, uploadKey: string, offset: number, body: AsyncIterable<Uint8Array>): Promise<number>;
  /** Stages a whole file under `uploadKey`, replacing an earlier one; its length. */
  stageWhole(cacheId: string, uploadKey: string, compression: string, body: AsyncIterable<Uint8Array>): Promise<number>;
  /** Checks the staged bytes against the narinfo and ingests them; the staging is gone afterwards. */
  finalize(request: FinalizeRequest): Promise<IngestOutcome>;
  /** Ingests a file the caller owns (a single-shot upload's NAR part, a stored blob). */
  ingestFile(request: Omit<FinalizeRequest, 'uploadKey' | 'submitted'> & { file: string; compression: string }): Promise<IngestOutcome>;
  /**
   * An ingest of a file the caller owns, up to its commit (ingest.ts): the checked NAR's zstd file,
   * or the held copy. Committed with commitPrepared, or thrown away with discardPrepared.
   */
  prepareFile(request: Omit<FinalizeRequest, 'uploadKey' | 'submitted'> & { file: string; compression: string }): Promise<PreparedIngest>;
  /** prepareFile for a small uncompressed NAR in memory: no staged file to write and read back (narBytesPass.ts). */
  prepareBytes(request: Omit<FinalizeRequest, 'uploadKey' | 'submitted'> & { nar: Uint8Array }): Promise<PreparedIngest>;
  /** Commits prepared ingests together, in one transaction when none fails (commitIngestBatch.ts); each one's outcome. */
  commitPrepared(prepared: readonly PreparedIngest[]): Promise<PromiseSettledResult<IngestOutcome>[]>;
  /** Removes what a prepared ingest wrote. */
  discardPrepared(prepared: PreparedIngest): Promise<void>;
  /** The cache's copy of exactly this NAR of the path with exactly this narinfo (an upload done before), or null. */
  held(cacheId: string, info: Narinfo): Promise<IngestOutcome | null>;
  /** Writes a body to a fresh temporary file (a single-shot upload's NAR part); the caller removes it. */
  stageTemporary(body: AsyncIterable<Uint8Array>): Promise<{ file: string; bytes: number }>;
  /** A fresh path in the staging tmp/ folder, which exists (the sweeper clears what a crash leaves there); the caller writes and removes it. */
  temporaryFile(): Promise<string>;
  /** The bytes staged under `uploadKey` as they stand (what the row counts), or null when nothing is. */
  readStaged(cacheId: string, uploadKey: string): Promise<{ size: number; body: AsyncIterable<Uint8Array> } | null>;
  /** Forgets a staged upload and its bytes; false when there was none. */
  abandon(cacheId: string, uploadKey: string): Promise<boolean>;
}

export function narUploads(deps: NarUploadsDeps): NarUploads {
  const locks = new KeyedLocks();
  const fileOf = (cacheId: string, uploadKey: string) => deps.staging.uploadFile(cacheId, uploadKey);

  const inProgress = (uploadKey: string) =>
    new UploadProblem('upload_in_progress', `another request is writing or finalizing the upload ${uploadKey} right now; retry when it has finished`);
  const inProgressElsewhere = (uploadKey: string) =>
    new UploadProblem('upload_in_progress', `another kiln server process is writing or finalizing the upload ${uploadKey} right now; retry when it has finished`);

  /** In this process: one request per upload at a time (the cross-process claim is taken inside `work`). */
  const locked = async <T>(cacheId: string, uploadKey: string, work: () => Promise<T>): Promise<T> => {
    const release = locks.tryAcquire(`${cacheId}/${uploadKey}`);
    if (release === null) throw inProgress(uploadKey);
    try {
      return await work();
    } finally {
      release();
    }
  };

  /**
   * Gives the claim up once this request is done with the upload, also when `work` failed (a row
   * `work` deleted holds no claim). A second try covers a connection that broke meanwhile; a
   * release that still fails is this request's error, since the claim would otherwise keep every
   * other process off the upload until this one exits.
   */
  const releasing = async <T>(cacheId: string, uploadKey: string, work: () => Promise<T>): Promise<T> => {
    const release = async () => {
      try {
        await releaseStagedUpload(deps.sql, cacheId, uploadKey, deps.leaseKey);
      } catch {
        await releaseStagedUpload(deps.sql, cacheId, uploadKey, deps.leaseKey);
      }
    };
    let result: T;
    try {
      result = await work();
    } catch (e) {
      await release().catch(() => undefined);
      throw e;
    }
    await release();
    return result;
  };

  /** Claims the existing upload: its row, or null when there is none; upload_in_progress when another live process holds it. */
  const claimed = async (cacheId: string, uploadKey: string): Promise<StagedUploadRow | null> => {
    const claim = await claimStagedUpload(deps.sql, cacheId, uploadKey, deps.leaseKey);
    if (claim !== null && !claim.claimed) throw inProgressElsewhere(uploadKey);
    return claim?.row ?? null;
  };

  const ingested = async (request: Parameters<NarUploads['ingestFile']>[0] & { framesDir?: string; checked?: CheckedNar }): Promise<IngestOutcome> => {
    const outcome = await ingestIntoCache(deps, {
      cacheId: request.cacheId,
      signingKey: request.signingKey,
      info: request.info,
      source: request.file,
      compression: request.compression,
      ...(request.framesDir === undefined ? {} : { framesDir: request.framesDir }),
      ...(request.checked === undefined ? {} : { checked: request.checked }),
    });
    deps.reads.forget(request.cacheId, storePathHashPart(request.info.storePath), outcome.fileHash);
    if (outcome.replacedFileHash !== undefined) deps.reads.forget(request.cacheId, storePathHashPart(request.info.storePath), outcome.replacedFileHash);
    return outcome;
  };

  const held = async (cacheId: string, info: Narinfo): Promise<IngestOutcome | null> => {
    const found = await findHeldPath(deps.sql, cacheId, storePathHashPart(info.storePath));
    return found && holdsExactly(found, info) ? heldOutcome(found) : null;
  };

  return {
    staged: (cacheId, uploadKey) => findStagedUpload(deps.sql, cacheId, uploadKey),
    held,

    appendChunk: (cacheId, uploadKey, offset, body) =>
      locked(cacheId, uploadKey, async () => {
        // The first chunk creates the row, claimed in the same statement; a later one claims it.
        const row = offset === 0 ? await startStagedUpload(deps.sql, cacheId, uploadKey, 'none', deps.leaseKey) : await claimed(cacheId, uploadKey);
        const mismatch = (staged: number) =>
          new UploadProblem('offset_mismatch', `offset ${offset} is not where the upload stands: ${staged} bytes are staged; send the chunk at offset=${staged}`, staged);
        if (row === null) throw offset === 0 ? inProgressElsewhere(uploadKey) : mismatch(0);
        return releasing(cacheId, uploadKey, async () => {
          if (row.bytesStaged !== offset) throw mismatch(row.bytesStaged);
          const file = fileOf(cacheId, uploadKey);
          const framesDir = deps.staging.framesDir(cacheId, uploadKey, row.createdAt);
          const end = await appendStagedBytes(file, offset, body, deps.maxUploadSize);
          if (!(await advanceStagedUpload(deps.sql, cacheId, uploadKey, offset, end))) {
            deps.checks.drop(framesDir);
            const now = (await findStagedUpload(deps.sql, cacheId, uploadKey))?.bytesStaged ?? 0;
            throw new UploadProblem('offset_mismatch', `the upload moved while this chunk was written: ${now} bytes are staged; send the chunk at offset=${now}`, now);
          }
          // The check pass and the compression of the frames now complete run while the client sends the next chunk.
          deps.checks.advance(framesDir, file, offset, end);
          deps.frames.advance(framesDir, file, end);
          return end;
        });
      }),

    stageWhole: (cacheId, uploadKey, compression, body) =>
      locked(cacheId, uploadKey, async () => {
        // Written beside the old file and renamed over it, so a failed PUT keeps an earlier good one.
        // The body is this request's own file: the upload is claimed only for the rename and the row.
        const temporary = deps.staging.tempFile('.upload');
        const length = await writeStagedFile(temporary, body, deps.maxUploadSize);
        try {
          const replaced = await startStagedUpload(deps.sql, cacheId, uploadKey, compression, deps.leaseKey);
          if (replaced === null) throw inProgressElsewhere(uploadKey);
          return await releasing(cacheId, uploadKey, async () => {
            const file = fileOf(cacheId, uploadKey);
            await mkdir(dirname(file), { recursive: true });
            await rename(temporary, file);
            deps.checks.drop(deps.staging.framesDir(cacheId, uploadKey, replaced.createdAt));
            if (!(await replaceStagedUpload(deps.sql, cacheId, uploadKey, compression, length, deps.leaseKey))) {
              throw new Error(`the staged upload ${uploadKey} was claimed by another process while this one held it (was this process's instance lease lost?)`);
            }
            return length;
          });
        } finally {
          await rm(temporary, { force: true });
        }
      }),

    finalize: (request) =>
      locked(request.cacheId, request.uploadKey, async () => {
        const { cacheId, uploadKey, info } = request;
        const row = await claimed(cacheId, uploadKey);
        if (row === null) {
          // A finalize retried after its answer was lost finds the path already held.
          const already = await held(cacheId, info);
          if (already !== null) return already;
          throw new UploadProblem('no_staged_upload', `nothing is staged for ${uploadKey} in this cache; upload the NAR first`);
        }
        return releasing(cacheId, uploadKey, async () => {
          if (request.submitted !== undefined) await recordStagedNarinfo(deps.sql, cacheId, uploadKey, request.submitted);
          if (row.compression === 'none' && row.bytesStaged < info.narSize) {
            throw new UploadProblem('incomplete_upload', `${row.bytesStaged} of the ${info.narSize} bytes the narinfo announces are staged; send the rest from offset=${row.bytesStaged}`, row.bytesStaged);
          }
          if (row.compression === 'none' && row.bytesStaged > info.narSize) {
            throw new UploadProblem('nar_mismatch', `NarSize: ${row.bytesStaged} bytes are staged, the narinfo says ${info.narSize}`, row.bytesStaged);
          }
          const file = fileOf(cacheId, uploadKey);
          const onDisk = await stat(file).catch(() => null);
          if (onDisk === null || onDisk.size < row.bytesStaged) {
            // A finalize that ingested, removed the file and then was cut short before the row went.
            const already = onDisk === null ? await held(cacheId, info) : null;
            if (already !== null) {
              await deleteStagedUpload(deps.sql, cacheId, uploadKey);
              return already;
            }
            throw new UploadProblem('no_staged_upload', `the staged bytes of ${uploadKey} are not on this server's disk (chunks and finalize must reach server processes sharing one baseDir, and a power cut may have lost them); abandon it with DELETE …/nars/${uploadKey}/upload and upload it again`);
          }
          // Bytes past the row's count are a chunk a crash cut short: they do not belong to the NAR.
          if (onDisk.size > row.bytesStaged) await truncate(file, row.bytesStaged);
          const compression = row.compression === 'none' ? 'none' : info.compression;
          const framesDir = deps.staging.framesDir(cacheId, uploadKey, row.createdAt);
          const checked = compression === 'none' ? ((await deps.checks.result(framesDir, info.narSize)) ?? undefined) : undefined;
          await deps.crashPoints?.('finalize.checked');
          const outcome = await ingested({ cacheId, signingKey: request.signingKey, info, file, compression, framesDir, ...(checked === undefined ? {} : { checked }) });
          deps.checks.drop(framesDir);
          await deps.crashPoints?.('finalize.ingested');
          // The file before the row: the row's claim keeps other processes away until both are
          // gone, and a new upload of the same path (same file name) can start only after.
          await rm(file, { force: true });
          await deps.crashPoints?.('finalize.stagedFileRemoved');
          await deleteStagedUpload(deps.sql, cacheId, uploadKey);
          await deps.frames.discard(framesDir);
          return outcome;
        });
      }),

    ingestFile: ingested,

    prepareFile: (request) => prepareIngest(deps, {
      cacheId: request.cacheId, signingKey: request.signingKey, info: request.info, source: request.file, compression: request.compression,
    }),

    prepareBytes: (request) => prepareIngest(deps, {
      cacheId: request.cacheId, signingKey: request.signingKey, info: request.info, source: request.nar, compression: 'none',
    }),

    async commitPrepared(prepared) {
      const ready = prepared.flatMap((p) => ('commit' in p ? [p] : []));
      const committed = await commitIngestBatch(deps.sql, deps.blobs, ready.map((p) => p.commit));
      const byCommit = new Map(ready.map((p, i) => [p, committed[i]!]));
      return prepared.map((p): PromiseSettledResult<IngestOutcome> => {
        if ('held' in p) return { status: 'fulfilled', value: p.held };
        const result = byCommit.get(p)!;
        if (result.status === 'rejected') return result;
        const outcome: IngestOutcome = { ...p.outcome, ...result.value };
        const hashPart = storePathHashPart(outcome.storePath);
        deps.reads.forget(p.commit.cacheId, hashPart, outcome.fileHash);
        if (outcome.replacedFileHash !== undefined) deps.reads.forget(p.commit.cacheId, hashPart, outcome.replacedFileHash);
        return { status: 'fulfilled', value: outcome };
      });
    },

    discardPrepared,

    async stageTemporary(body) {
      const file = deps.staging.tempFile('.nar');
      return { file, bytes: await writeStagedFile(file, body, deps.maxUploadSize) };
    },

    async temporaryFile() {
      const file = deps.staging.tempFile('.nar');
      await mkdir(dirname(file), { recursive: true });
      return file;
    },

    async readStaged(cacheId, uploadKey) {
      const row = await findStagedUpload(deps.sql, cacheId, uploadKey);
      if (row === null || row.bytesStaged === 0) return null;
      const path = fileOf(cacheId, uploadKey);
      const info = await stat(path).catch(() => null);
      if (info === null || info.size < row.bytesStaged) return null;
      const size = row.bytesStaged;
      return {
        size,
        body: {
          async *[Symbol.asyncIterator]() {
            yield* createReadStream(path, { end: size - 1, highWaterMark: 1 << 20 }) as AsyncIterable<Buffer>;
          },
        },
      };
    },

    abandon: (cacheId, uploadKey) =>
      locked(cacheId, uploadKey, async () => {
        // No row: nothing to forget. A file without a row is left to the sweeper, since another
        // process may be creating the upload anew right now.
        const row = await claimed(cacheId, uploadKey);
        if (row === null) return false;
        return releasing(cacheId, uploadKey, async () => {
          await rm(fileOf(cacheId, uploadKey), { force: true }); // before the row, as in finalize
          const existed = await deleteStagedUpload(deps.sql, cacheId, uploadKey);
          const framesDir = deps.staging.framesDir(cacheId, uploadKey, row.createdAt);
          deps.checks.drop(framesDir);
          await deps.frames.discard(framesDir);
          return existed;
        });
      }),
  };
}
