// Uploading NARs into a cache, for the REST routes (Bearer, writeStore) and for `nix copy --to`
// (Basic, at the binary cache paths): who may, admission through the UploadBudget, and the
// translation of the storage layer's UploadProblems into 4xx answers that name the problem.
import { rm } from 'node:fs/promises';
import type { Sql } from 'postgres';
import { acquireUpload, type UploadBudgetRef, type UploadPermit } from '../actors/index.js';
import {
  ApiError,
  narinfoOfUpload,
  parseNarinfo,
  parseNarUrl,
  parseNixNarFileName,
  storePathHashPart,
  type Narinfo,
  type NarUploadInfo,
  type NarUploadResult,
} from '../protocol/index.js';
import { isUploadProblem, type Events, type IngestOutcome, type NarStorage, type SecretBox } from '../storage/index.js';
import { openCacheKey } from './cacheKeys.js';
import type { BinaryCache } from './binaryCacheAccess.js';
import type { CacheStorageLimits } from './cacheStorage.js';
import { announceAddedNar } from './narUploadEvents.js';
import type { Principal } from './principal.js';
import { demandCache } from './targets.js';
import { uploadFailure } from './uploadFailure.js';

export interface NarUploadDeps {
  /** the pool permission lookups run on (database.web.*) */
  sql: Sql;
  nars: NarStorage;
  uploadBudget: UploadBudgetRef;
  secretBox: SecretBox;
  /** upload.restWaitSecs */
  restWaitSecs: number;
  /** nar.maxUploadSize */
  maxUploadSize: number;
  /** the cache's max_storage_bytes and cache.maxStorageGb: an upload that would not fit is refused (413 cache_full) */
  storageLimits: CacheStorageLimits;
  /** cache.nar.upload, cache.nar.signed, cache.changed for each path an upload adds */
  events: Events;
}

/** The cache an upload goes into: its id and the key it signs with; the uploader when a REST caller is a user. */
export type UploadTarget = Pick<BinaryCache, 'id' | 'name' | 'signingKey'> & {
  uploader?: string;
  /** the uploading user's id: upload permits are shared fairly between owners (actors/uploadAdmission.ts) */
  owner?: string;
};

export interface NarUploadService {
  /** The cache, when the caller holds writeStore on it: 404 when it cannot see it, 403 without the permission. */
  restTarget(who: Principal, cache: string): Promise<UploadTarget>;
  /**
   * A permit for `bytes` of upload work. REST uploads (`restWait`) give up after upload.restWaitSecs
   * with 503 upload_busy; `nix copy` waits (Nix 2.8 hangs retrying a 5xx answer to a PUT).
   * `owner` (a user id) gets its fair share of the permits while other owners wait.
   */
  admit(bytes: number, restWait: boolean, owner?: string): Promise<UploadPermit>;
  staged(target: UploadTarget, hash: string): Promise<{ bytes_staged: number; updated_at: Date }>;
  /** Admitted for `declaredBytes` (Content-Length), or a CLI-sized chunk when the length is not declared. */
  appendChunk(target: UploadTarget, hash: string, offset: number, declaredBytes: number | null, body: AsyncIterable<Uint8Array>): Promise<{ bytes_staged: number }>;
  finalize(target: UploadTarget, hash: string, body: NarUploadInfo): Promise<NarUploadResult>;
  abandon(target: UploadTarget, hash: string): Promise<{ abandoned: boolean }>;
  /** The JSON narinfo of a single-shot upload, checked (400 invalid_narinfo naming the field). */
  parseUploadInfo(body: NarUploadInfo): Narinfo;
  /** Writes a single-shot upload's NAR part to a temporary file (413 nar_too_large past nar.maxUploadSize). */
  stageTemporary(body: AsyncIterable<Uint8Array>): Promise<{ file: string; bytes: number }>;
  discardTemporary(file: string): Promise<void>;
  /** Ingests a single-shot upload's NAR part from its temporary file. */
  ingestFile(target: UploadTarget, info: Narinfo, file: string): Promise<NarUploadResult>;
  /** `nix copy`: PUT nar/<file>: stages the file as Nix compressed it. */
  nixPutNar(target: UploadTarget, fileName: string, body: AsyncIterable<Uint8Array>): Promise<void>;
  /** `nix copy`: PUT <hash>.narinfo: finds the NAR it names, checks it and signs it for the cache. */
  nixPutNarinfo(target: UploadTarget, hash: string, text: string): Promise<NarUploadResult>;
}

/** What a chunk of unknown length is admitted as: the CLI's chunk size (spec, Limits). */
const CLI_CHUNK_BYTES = 32 * 1024 * 1024;

const narTooLarge = (narSize: number, limit: number): ApiError =>
  new ApiError('nar_too_large', `the NAR has ${narSize} bytes, more than the limit of ${limit} bytes (nar.maxUploadSize)`);

export const resultOf = (outcome: IngestOutcome): NarUploadResult => ({
  store_path: outcome.storePath,
  nar_hash: outcome.narHash,
  nar_size: outcome.narSize,
  file_hash: outcome.fileHash,
  file_size: outcome.fileSize,
  status: outcome.status,
});

function checkStorePathHash(info: Narinfo, hash: string): void {
  const actual = storePathHashPart(info.storePath);
  if (actual !== hash) {
    throw new ApiError('store_path_mismatch', `the narinfo is for ${info.storePath}, but the request names the hash ${hash}`);
  }
}

/** Storage faults stay plain Errors (500); what the client got wrong becomes its 4xx. */
async function translated<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (e) {
    if (isUploadProblem(e)) throw uploadFailure(e);
    throw e;
  }
}

export function narUploadService(deps: NarUploadDeps): NarUploadService {
  const { nars } = deps;
  const uploads = nars.uploads;
  // Checked before the NAR is read, against its NarSize: what a path will take once stored (zstd)
  // is known only after compression, and NarSize bounds it, so a limit is never passed. A path the
  // cache already holds (a retry) needs no room.
  const announced = async (target: UploadTarget, result: NarUploadResult): Promise<NarUploadResult> => {
    if (result.status === 'added') {
      await announceAddedNar(deps.events, {
        cache: { id: target.id, name: target.name, keyName: target.signingKey.name },
        storePath: result.store_path, narHash: result.nar_hash, narSize: result.nar_size, fileHash: result.file_hash, fileSize: result.file_size,
        ...(target.uploader === undefined ? {} : { user: target.uploader }),
      });
    }
    return result;
  };
  const demandRoomFor = async (target: UploadTarget, info: Narinfo): Promise<void> => {
    if ((await uploads.held(target.id, info)) === null) await deps.storageLimits.demandRoom(target, info.narSize);
  };
  // Permits are held until the NAR is in storage (upload.concurrency), then given back.
  const admitted = async <T>(target: UploadTarget, bytes: number, restWait: boolean, work: () => Promise<T>): Promise<T> => {
    const permit = await service.admit(bytes, restWait, target.owner);
    try {
      return await work();
    } finally {
      permit.release();
    }
  };

  const service: NarUploadService = {
    async restTarget(who, name) {
      const found = await demandCache(deps.sql, who, name, 'writeStore');
      const [row] = await deps.sql<{ active: boolean; key_name: string; secret_key: Buffer }[]>`
        select active, key_name, secret_key from caches where id = ${found.row.id}`;
      if (!row) throw new ApiError('not_found', `no cache "${name}"`);
      if (!row.active) throw new ApiError('cache_inactive', `cache "${found.row.name}" is disabled and takes no uploads; enable it with POST /caches/${found.row.name}/active`);
      return {
        id: found.row.id, name: found.row.name, signingKey: openCacheKey(deps.secretBox, row),
        ...(who.kind === 'user' ? { uploader: who.username, owner: who.userId } : {}),
      };
    },

    async admit(bytes, restWait, owner) {
      try {
        const who = owner === undefined ? {} : { owner };
        return await acquireUpload(deps.uploadBudget, restWait ? { bytes, signal: AbortSignal.timeout(deps.restWaitSecs * 1000), ...who } : { bytes, ...who });
      } catch (e) {
        if (e instanceof DOMException && e.name === 'TimeoutError') {
          throw new ApiError('upload_busy', `no upload permit came within ${deps.restWaitSecs} s (upload.restWaitSecs); the server is busy with other uploads, retry later`, {
            headers: { 'Retry-After': String(deps.restWaitSecs) },
          });
        }
        throw e;
      }
    },

    async staged(target, hash) {
      const row = await uploads.staged(target.id, hash);
      if (row === null) throw new ApiError('no_staged_upload', `nothing is staged for ${hash} in cache "${target.name}"`);
      return { bytes_staged: row.bytesStaged, updated_at: row.updatedAt };
    },

    async appendChunk(target, hash, offset, declaredBytes, body) {
      if (declaredBytes !== null && offset + declaredBytes > deps.maxUploadSize) {
        throw new ApiError('nar_too_large', `offset ${offset} plus a chunk of ${declaredBytes} bytes exceeds the limit of ${deps.maxUploadSize} bytes (nar.maxUploadSize)`);
      }
      await deps.storageLimits.demandRoom(target, offset + Math.max(1, declaredBytes ?? 0));
      return admitted(target, declaredBytes ?? CLI_CHUNK_BYTES, true, () =>
        translated(async () => ({ bytes_staged: await uploads.appendChunk(target.id, hash, offset, body) })));
    },

    async finalize(target, hash, body) {
      const info = service.parseUploadInfo(body);
      checkStorePathHash(info, hash);
      if (info.narSize > deps.maxUploadSize) throw narTooLarge(info.narSize, deps.maxUploadSize);
      await demandRoomFor(target, info);
      return announced(target, await admitted(target, info.narSize, true, () =>
        translated(async () => resultOf(await uploads.finalize({ cacheId: target.id, uploadKey: hash, signingKey: target.signingKey, info, submitted: body })))));
    },

    abandon: (target, hash) => translated(async () => ({ abandoned: await uploads.abandon(target.id, hash) })),

    parseUploadInfo(body) {
      const parsed = narinfoOfUpload(body);
      if (!parsed.ok) throw new ApiError('invalid_narinfo', `narinfo ${parsed.field}: ${parsed.reason}`);
      return parsed.value;
    },

    stageTemporary: (body) => translated(() => uploads.stageTemporary(body)),
    discardTemporary: (file) => rm(file, { force: true }),

    async ingestFile(target, info, file) {
      await demandRoomFor(target, info);
      return announced(target, await translated(async () => resultOf(await uploads.ingestFile({ cacheId: target.id, signingKey: target.signingKey, info, file, compression: 'none' }))));
    },

    async nixPutNar(target, fileName, body) {
      const named = parseNixNarFileName(fileName);
      if (!named) throw new ApiError('invalid_parameter', `nar/${fileName}: expected nar/<hash>.nar with an optional .xz, .bz2, .zst, .br or .gz`);
      const { compression } = named;
      // The NarSize comes with the narinfo PUT; a cache already full is refused before the bytes are staged.
      await deps.storageLimits.demandRoom(target, 1);
      await translated(() => uploads.stageWhole(target.id, `nar/${fileName}`, compression, body));
    },

    async nixPutNarinfo(target, hash, text) {
      const parsed = parseNarinfo(text);
      if (!parsed.ok) throw new ApiError('invalid_narinfo', `narinfo ${parsed.field}: ${parsed.reason}`);
      // Sig lines are the client's: the cache signs with its own key, so they are dropped unread.
      const info: Narinfo = { ...parsed.value, sigs: [] };
      checkStorePathHash(info, hash);
      if (info.narSize > deps.maxUploadSize) throw narTooLarge(info.narSize, deps.maxUploadSize);
      await demandRoomFor(target, info);
      return announced(target, await admitted(target, info.narSize, false, () => translated(() => nixIngest(deps, target, info))));
    },
  };
  return service;
}

/** The NAR a `nix copy` narinfo names: staged by its PUT, or a file the cache already serves. */
async function nixIngest(deps: NarUploadDeps, target: UploadTarget, info: Narinfo): Promise<NarUploadResult> {
  const { uploads, reads } = deps.nars;
  const uploadKey = info.url;
  const fileName = uploadKey.startsWith('nar/') ? uploadKey.slice(4) : '';
  if (parseNixNarFileName(fileName) !== undefined && (await uploads.staged(target.id, uploadKey)) !== null) {
    return resultOf(await uploads.finalize({ cacheId: target.id, uploadKey, signingKey: target.signingKey, info }));
  }
  // Nix skips the NAR PUT when HEAD found the file: kiln's zstd bytes can equal Nix's, and then the
  // file is one this cache already serves, for this path or another one with identical contents.
  const served = parseNarUrl(uploadKey);
  if (served !== undefined && (await reads.narFile(target.id, served)) !== null) {
    return resultOf(await deps.nars.ingestStoredFile({ cacheId: target.id, signingKey: target.signingKey, info }, served));
  }
  const held = await uploads.held(target.id, info);
  if (held !== null) return resultOf(held);
  throw new ApiError('no_staged_upload', `the narinfo's URL ${info.url} names no NAR uploaded to cache "${target.name}"; PUT the NAR file first`);
}
