// The front door of "put a NAR into a cache", for every path that does it: REST uploads and
// `nix copy` (narUploads.ts), /proto pushes (workerNars.ts) and direct builds (directBuilds.ts).
// Each path receives the bytes its own way; the rules are here, once: admission through the
// UploadBudget, the room check against the cache's storage limits, the ingest signed with the
// cache's key (loaded here, never handed to a caller), the temporary file forgotten afterwards,
// the events of a path that was added, and the storage layer's problems as 4xx ApiErrors
// (uploadFailure.ts). What is not an ApiError is a server fault.
import { rm } from 'node:fs/promises';
import { acquireUpload, type UploadBudgetRef } from '../../actors/index.js';
import { childSpan, newTraceRoot, type Narinfo, type NarUploadResult, type SigningKey, type SpanIds } from '../../protocol/index.js';
import { disabledTracer, type StageTracer } from '../../config/index.js';
import { isUploadProblem, type Events, type IngestOutcome, type KilnMetrics, type NarStorage, type PreparedIngest } from '../../storage/index.js';
import type { CacheSigningKeys } from './cacheSigningKeys.js';
import type { CacheStorageLimits } from './cacheStorage.js';
import { announceAddedNar, announceAddedNars } from './narUploadEvents.js';
import { uploadFailure } from './uploadFailure.js';

/** The cache a NAR goes into; the uploader when a user uploads it. */
export interface IngestTarget {
  id: string;
  name: string;
  /** the uploading user's name, for cache.nar.upload */
  uploader?: string;
  /** the uploading user's id: upload permits are shared fairly between owners (actors/uploadAdmission.ts) */
  owner?: string;
}

/**
 * How long a caller waits for an upload permit: `rest` gives up after upload.restWaitSecs
 * (UploadBusy); `wait` waits (Nix 2.8 hangs retrying a 5xx answer to a PUT; workers and direct
 * builds have nobody to answer 503 to).
 */
export type AdmissionMode = 'rest' | 'wait';

/** Where the bytes of an ingest are. */
export type NarSource =
  /** a file the caller owns, uncompressed */
  | { file: string }
  /** an upload staged under `uploadKey` (REST chunks, a `nix copy` NAR PUT) */
  | { staged: string; submitted?: unknown }
  /** a NAR file the cache already serves, by its file hash */
  | { stored: string };

/** No permit came within upload.restWaitSecs. */
export class UploadBusy extends Error {
  constructor(readonly waitedSecs: number) {
    super(`no upload permit came within ${waitedSecs} s (upload.restWaitSecs); the server is busy with other uploads, retry later`);
    this.name = 'UploadBusy';
  }
}

export interface NarIngestDeps {
  nars: NarStorage;
  keys: CacheSigningKeys;
  uploadBudget: UploadBudgetRef;
  /** upload.restWaitSecs */
  restWaitSecs: number;
  /** the cache's max_storage_bytes and cache.maxStorageGb: a NAR that would not fit is refused (413 cache_full) */
  storageLimits: CacheStorageLimits;
  /** cache.nar.upload, cache.nar.signed, cache.changed for each path an ingest adds */
  events: Events;
  /** kiln_cache_nar_ingested_bytes_total and kiln_upload_busy_total */
  metrics?: Pick<KilnMetrics, 'narBytesIngested' | 'uploadRefusedBusy'>;
  /** log.traceDir: each ingest's stages as spans (docs/metrics.md, "Stage traces") */
  tracer?: StageTracer;
}

export interface NarIngest {
  /** Runs `work` holding a permit for `bytes` of upload work, given back when it ends. */
  admitted<T>(bytes: number, mode: AdmissionMode, owner: string | undefined, work: () => Promise<T>): Promise<T>;
  /** Refuses (413 cache_full) `bytes` the cache has no room for. */
  demandRoom(target: IngestTarget, bytes: number): Promise<void>;
  /**
   * Refuses (413 cache_full) a path the cache has no room for, checked against its NarSize (which
   * bounds what it takes once stored). A path the cache already holds (a retry) needs no room: its
   * copy is returned; null when the path is new.
   */
  demandRoomFor(target: IngestTarget, info: Narinfo): Promise<NarUploadResult | null>;
  /**
   * Ingests the NAR signed with the cache's key, and announces the path when it was added. `trace`:
   * the span its spans go below (a build job's, for a worker's push); none: a trace of its own.
   */
  ingest(target: IngestTarget, info: Narinfo, source: NarSource, trace?: SpanIds): Promise<NarUploadResult>;
  /**
   * A batched ingest's first half (`nix copy --to ssh-ng://`): the NAR in `file` (or, when small,
   * its `bytes` in memory) checked and compressed, signed with the cache's key, not yet committed;
   * or the held copy. The caller commits it with commitMany or throws it away with discard; `file`
   * stays the caller's.
   */
  prepare(target: IngestTarget, info: Narinfo, source: { file: string } | { bytes: Uint8Array }): Promise<PreparedIngest>;
  /**
   * Commits prepared ingests of `target` together (one transaction when none fails) and announces
   * the added paths in one events transaction; each one's result or its error (4xx ApiErrors as ingest's).
   */
  commitMany(target: IngestTarget, prepared: readonly PreparedIngest[]): Promise<PromiseSettledResult<NarUploadResult>[]>;
  /** Throws a prepared ingest away. */
  discard(prepared: PreparedIngest): Promise<void>;
  /** Writes `body` to a temporary file (413 nar_too_large past nar.maxUploadSize); the caller forgets it. */
  stage(body: AsyncIterable<Uint8Array>): Promise<string>;
  /** A fresh temporary path for a caller writing a NAR piece by piece; the caller forgets it. */
  temporaryFile(): Promise<string>;
  /** Removes a temporary file. */
  forget(file: string): Promise<void>;
  /** Everything at once, for a NAR in memory: room, permit, temporary file, ingest, announce. */
  put(target: IngestTarget, info: Narinfo, nar: Uint8Array, mode: AdmissionMode): Promise<NarUploadResult>;
}

export const resultOf = (outcome: IngestOutcome): NarUploadResult => ({
  store_path: outcome.storePath,
  nar_hash: outcome.narHash,
  nar_size: outcome.narSize,
  file_hash: outcome.fileHash,
  file_size: outcome.fileSize,
  status: outcome.status,
});

/** Runs storage work: its faults stay plain Errors (500); what the client got wrong becomes its 4xx. */
export async function translated<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (e) {
    if (isUploadProblem(e)) throw uploadFailure(e);
    throw e;
  }
}

export function narIngest(deps: NarIngestDeps): NarIngest {
  const { uploads } = deps.nars;
  const tracer = deps.tracer ?? disabledTracer;

  const admit = async (bytes: number, mode: AdmissionMode, owner: string | undefined) => {
    const who = owner === undefined ? {} : { owner };
    try {
      return await acquireUpload(deps.uploadBudget, mode === 'rest' ? { bytes, signal: AbortSignal.timeout(deps.restWaitSecs * 1000), ...who } : { bytes, ...who });
    } catch (e) {
      if (e instanceof DOMException && e.name === 'TimeoutError') {
        deps.metrics?.uploadRefusedBusy();
        throw new UploadBusy(deps.restWaitSecs);
      }
      throw e;
    }
  };

  const stored = (request: { cacheId: string; signingKey: SigningKey; info: Narinfo }, source: NarSource): Promise<IngestOutcome> => {
    if ('file' in source) return uploads.ingestFile({ ...request, file: source.file, compression: 'none' });
    if ('staged' in source) return uploads.finalize({ ...request, uploadKey: source.staged, ...(source.submitted === undefined ? {} : { submitted: source.submitted }) });
    return deps.nars.ingestStoredFile(request, source.stored);
  };

  const service: NarIngest = {
    async admitted(bytes, mode, owner, work) {
      const permit = await admit(bytes, mode, owner);
      try {
        return await work();
      } finally {
        permit.release();
      }
    },

    demandRoom: (target, bytes) => deps.storageLimits.demandRoom(target, bytes),

    async demandRoomFor(target, info) {
      const held = await uploads.held(target.id, info);
      if (held !== null) return resultOf(held);
      await deps.storageLimits.demandRoom(target, info.narSize);
      return null;
    },

    async ingest(target, info, source, trace) {
      // Below the caller's span, or the root of a trace of its own.
      const ids = trace === undefined ? newTraceRoot() : childSpan(trace);
      const span = {
        ids, end: tracer.start('nar.ingest', ids, {
          cache: target.name, store_path: info.storePath, nar_size: info.narSize, source: 'file' in source ? 'file' : 'staged' in source ? 'staged' : 'stored',
        }),
      };
      try {
        const signingKey = await deps.keys.of(target.id);
        // The storage pass: the NAR read and verified against its NarHash, compressed, written, recorded and signed.
        const store = tracer.child('nar.store', span.ids);
        let result: NarUploadResult;
        try {
          result = resultOf(await translated(() => stored({ cacheId: target.id, signingKey, info }, source)));
          store.end('ok', { status: result.status, file_size: result.file_size });
        } catch (error) {
          store.end('error');
          throw error;
        }
        if (result.status === 'added') {
          deps.metrics?.narBytesIngested(target.name, result.file_size);
          const announce = tracer.child('nar.announce', span.ids);
          await announceAddedNar(deps.events, {
            cache: { id: target.id, name: target.name, keyName: signingKey.name },
            storePath: result.store_path, narHash: result.nar_hash, narSize: result.nar_size, fileHash: result.file_hash, fileSize: result.file_size,
            ...(target.uploader === undefined ? {} : { user: target.uploader }),
          });
          announce.end();
        }
        span.end('ok', { status: result.status });
        return result;
      } catch (error) {
        span.end('error', { error: (error instanceof Error ? error.message : String(error)).slice(0, 300) });
        throw error;
      }
    },

    async prepare(target, info, source) {
      const signingKey = await deps.keys.of(target.id);
      const request = { cacheId: target.id, signingKey, info };
      return translated(() => ('bytes' in source ? uploads.prepareBytes({ ...request, nar: source.bytes }) : uploads.prepareFile({ ...request, file: source.file, compression: 'none' })));
    },

    async commitMany(target, prepared) {
      const outcomes = await uploads.commitPrepared(prepared);
      const results = outcomes.map((settled): PromiseSettledResult<NarUploadResult> => {
        if (settled.status === 'fulfilled') return { status: 'fulfilled', value: resultOf(settled.value) };
        return { status: 'rejected', reason: isUploadProblem(settled.reason) ? uploadFailure(settled.reason) : settled.reason };
      });
      const added = results.flatMap((r) => (r.status === 'fulfilled' && r.value.status === 'added' ? [r.value] : []));
      if (added.length > 0) {
        const { name: keyName } = await deps.keys.of(target.id);
        for (const result of added) deps.metrics?.narBytesIngested(target.name, result.file_size);
        await announceAddedNars(deps.events, added.map((result) => ({
          cache: { id: target.id, name: target.name, keyName },
          storePath: result.store_path, narHash: result.nar_hash, narSize: result.nar_size, fileHash: result.file_hash, fileSize: result.file_size,
          ...(target.uploader === undefined ? {} : { user: target.uploader }),
        })));
      }
      return results;
    },

    discard: (prepared) => uploads.discardPrepared(prepared),

    stage: async (body) => (await translated(() => uploads.stageTemporary(body))).file,

    temporaryFile: () => uploads.temporaryFile(),
    forget: (file) => rm(file, { force: true }),

    async put(target, info, nar, mode) {
      const held = await service.demandRoomFor(target, info);
      if (held !== null) return held;
      return service.admitted(info.narSize, mode, target.owner, async () => {
        const file = await service.stage((async function* () {
          yield nar;
        })());
        try {
          return await service.ingest(target, info, { file });
        } finally {
          await service.forget(file);
        }
      });
    },
  };
  return service;
}
