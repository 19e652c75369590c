// Staged uploads: REST chunks appended at an offset, `nix copy` NAR files put whole, and the
// finalize step that ingests them. The row is the truth about how many bytes count; the file sits
// under <baseDir>/staging on this process's disk. Nothing here checks permissions (services do).
import { mkdir, rename, rm, stat, truncate } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Narinfo, SigningKey } from '../../protocol/index.js';
import { ingestIntoCache, type IngestDeps, type IngestOutcome } from './ingest.js';
import { KeyedLocks } from './keyedLocks.js';
import type { NarReads } from './narReads.js';
import type { CheckedNar } from './stagedCheck.js';
import type { StagedChecks } from './stagedChecks.js';
import { appendStagedBytes, writeStagedFile } from './stagingFile.js';
import {
  advanceStagedUpload,
  deleteStagedUpload,
  findHeldPath,
  findStagedUpload,
  recordStagedNarinfo,
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
  /** The cache's copy of exactly this NAR of the path (an upload done before), or null. */
  held(cacheId: string, info: Narinfo): Promise<IngestOutcome | null>;
  /** Writes a body to a fresh temporary file (a single-shot upload's NAR part); the caller removes it. */
  stageTemporary(body: AsyncIterable<Uint8Array>): Promise<{ file: string; bytes: number }>;
  /** Forgets a staged upload and its bytes; false when there was none. */
  abandon(cacheId: string, uploadKey: string): Promise<boolean>;
}

const hashPartOf = (info: Narinfo): string => info.storePath.slice(info.storePath.lastIndexOf('/') + 1, info.storePath.lastIndexOf('/') + 33);

export function narUploads(deps: NarUploadsDeps): NarUploads {
  const locks = new KeyedLocks();
  const fileOf = (cacheId: string, uploadKey: string) => deps.staging.uploadFile(cacheId, uploadKey);

  const locked = async <T>(cacheId: string, uploadKey: string, work: () => Promise<T>): Promise<T> => {
    const release = locks.tryAcquire(`${cacheId}/${uploadKey}`);
    if (release === null) {
      throw new UploadProblem('upload_in_progress', `another request is writing or finalizing the upload ${uploadKey} right now; retry when it has finished`);
    }
    try {
      return await work();
    } finally {
      release();
    }
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
    deps.reads.forget(request.cacheId, hashPartOf(request.info), outcome.fileHash);
    return outcome;
  };

  const held = async (cacheId: string, info: Narinfo): Promise<IngestOutcome | null> => {
    const found = await findHeldPath(deps.sql, cacheId, hashPartOf(info));
    return found && found.narHash === info.narHash ? { ...found, status: 'held' } : null;
  };

  return {
    staged: (cacheId, uploadKey) => findStagedUpload(deps.sql, cacheId, uploadKey),
    held,

    appendChunk: (cacheId, uploadKey, offset, body) =>
      locked(cacheId, uploadKey, async () => {
        const row = (await findStagedUpload(deps.sql, cacheId, uploadKey)) ?? (offset === 0 ? await startStagedUpload(deps.sql, cacheId, uploadKey, 'none') : null);
        const staged = row?.bytesStaged ?? 0;
        if (row === null || staged !== offset) {
          throw new UploadProblem('offset_mismatch', `offset ${offset} is not where the upload stands: ${staged} bytes are staged; send the chunk at offset=${staged}`, staged);
        }
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
      }),

    stageWhole: (cacheId, uploadKey, compression, body) =>
      locked(cacheId, uploadKey, async () => {
        // Written beside the old file and renamed over it, so a failed PUT keeps an earlier good one.
        const temporary = deps.staging.tempFile('.upload');
        const length = await writeStagedFile(temporary, body, deps.maxUploadSize);
        const file = fileOf(cacheId, uploadKey);
        await mkdir(dirname(file), { recursive: true });
        await rename(temporary, file);
        const replaced = await findStagedUpload(deps.sql, cacheId, uploadKey);
        if (replaced) deps.checks.drop(deps.staging.framesDir(cacheId, uploadKey, replaced.createdAt));
        await replaceStagedUpload(deps.sql, cacheId, uploadKey, compression, length);
        return length;
      }),

    finalize: (request) =>
      locked(request.cacheId, request.uploadKey, async () => {
        const { cacheId, uploadKey, info } = request;
        const row = await findStagedUpload(deps.sql, cacheId, uploadKey);
        if (row === null) {
          // A finalize retried after its answer was lost finds the path already held.
          const already = await held(cacheId, info);
          if (already !== null) return already;
          throw new UploadProblem('no_staged_upload', `nothing is staged for ${uploadKey} in this cache; upload the NAR first`);
        }
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
          throw new UploadProblem('no_staged_upload', `the staged bytes of ${uploadKey} are not on this server's disk (chunks and finalize must reach the same kiln process, and a power cut may have lost them); abandon it with DELETE …/nars/${uploadKey}/upload and upload it again`);
        }
        // Bytes past the row's count are a chunk a crash cut short: they do not belong to the NAR.
        if (onDisk.size > row.bytesStaged) await truncate(file, row.bytesStaged);
        const compression = row.compression === 'none' ? 'none' : info.compression;
        const framesDir = deps.staging.framesDir(cacheId, uploadKey, row.createdAt);
        const checked = compression === 'none' ? ((await deps.checks.result(framesDir, info.narSize)) ?? undefined) : undefined;
        const outcome = await ingested({ cacheId, signingKey: request.signingKey, info, file, compression, framesDir, ...(checked === undefined ? {} : { checked }) });
        deps.checks.drop(framesDir);
        await deleteStagedUpload(deps.sql, cacheId, uploadKey);
        await rm(file, { force: true });
        await deps.frames.discard(framesDir);
        return outcome;
      }),

    ingestFile: ingested,

    async stageTemporary(body) {
      const file = deps.staging.tempFile('.nar');
      return { file, bytes: await writeStagedFile(file, body, deps.maxUploadSize) };
    },

    abandon: (cacheId, uploadKey) =>
      locked(cacheId, uploadKey, async () => {
        const row = await findStagedUpload(deps.sql, cacheId, uploadKey);
        const existed = await deleteStagedUpload(deps.sql, cacheId, uploadKey);
        await rm(fileOf(cacheId, uploadKey), { force: true });
        if (row) {
          const framesDir = deps.staging.framesDir(cacheId, uploadKey, row.createdAt);
          deps.checks.drop(framesDir);
          await deps.frames.discard(framesDir);
        }
        return existed;
      }),
  };
}
