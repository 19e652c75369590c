// Uploading NARs into a cache, for the REST routes (Bearer, writeStore) and for `nix copy --to`
// (Basic, at the binary cache paths): who may, how each request hands its bytes to the ingest
// front door (narIngest.ts: admission, room, signing, events), and its refusals as 4xx answers.
import type { Sql } from 'postgres';
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
} from '../../protocol/index.js';
import type { NarStorage } from '../../storage/index.js';
import { resultOf, translated, UploadBusy, type AdmissionMode, type IngestTarget, type NarIngest } from './narIngest.js';
import type { Principal } from '../access/index.js';
import { demandCache } from '../access/index.js';

export interface NarUploadDeps {
  /** the pool permission lookups run on (database.web.*) */
  sql: Sql;
  nars: NarStorage;
  ingest: NarIngest;
  /** nar.maxUploadSize */
  maxUploadSize: number;
}

/** Receives a single-shot upload: stages its NAR part with `stage` and returns its narinfo. */
export type SingleShotReader = (stage: (nar: AsyncIterable<Uint8Array>) => Promise<void>) => Promise<Narinfo>;

export interface NarUploadService {
  /** The cache, when the caller holds writeStore on it: 404 when it cannot see it, 403 without the permission. */
  restTarget(who: Principal, cache: string): Promise<IngestTarget>;
  staged(target: IngestTarget, hash: string): Promise<{ bytes_staged: number; updated_at: Date }>;
  /** Admitted for `declaredBytes` (Content-Length), or a CLI-sized chunk when the length is not declared. */
  appendChunk(target: IngestTarget, hash: string, offset: number, declaredBytes: number | null, body: AsyncIterable<Uint8Array>): Promise<{ bytes_staged: number }>;
  finalize(target: IngestTarget, hash: string, body: NarUploadInfo): Promise<NarUploadResult>;
  abandon(target: IngestTarget, hash: string): Promise<{ abandoned: boolean }>;
  /** The JSON narinfo of a single-shot upload, checked (400 invalid_narinfo naming the field). */
  parseUploadInfo(body: NarUploadInfo): Narinfo;
  /**
   * A single-shot upload, admitted for `declaredBytes` (else nar.maxUploadSize) while `read` receives
   * it; its NAR part goes to a temporary file (413 nar_too_large past nar.maxUploadSize) that is
   * ingested once `read` returns the narinfo, and removed whatever happens.
   */
  singleShot(target: IngestTarget, declaredBytes: number | null, read: SingleShotReader): Promise<NarUploadResult>;
  /** `nix copy`: PUT nar/<file>: stages the file as Nix compressed it, admitted for `declaredBytes` (else nar.maxUploadSize). */
  nixPutNar(target: IngestTarget, fileName: string, declaredBytes: number | null, body: AsyncIterable<Uint8Array>): Promise<void>;
  /** `nix copy`: PUT <hash>.narinfo: finds the NAR it names, checks it and signs it for the cache. */
  nixPutNarinfo(target: IngestTarget, hash: string, text: string): Promise<NarUploadResult>;
  /** `nix copy`: a NAR file it PUT whose narinfo has not come yet (Nix asks with HEAD before it uploads), or null. */
  nixStagedFile(target: IngestTarget, fileName: string): Promise<{ size: number; body: AsyncIterable<Uint8Array> } | null>;
}

/** What a chunk of unknown length is admitted as: the CLI's chunk size (spec, Limits). */
const CLI_CHUNK_BYTES = 32 * 1024 * 1024;

const narTooLarge = (narSize: number, limit: number): ApiError =>
  new ApiError('nar_too_large', `the NAR has ${narSize} bytes, more than the limit of ${limit} bytes (nar.maxUploadSize)`);

function checkStorePathHash(info: Narinfo, hash: string): void {
  const actual = storePathHashPart(info.storePath);
  if (actual !== hash) {
    throw new ApiError('store_path_mismatch', `the narinfo is for ${info.storePath}, but the request names the hash ${hash}`);
  }
}

export function narUploadService(deps: NarUploadDeps): NarUploadService {
  const { ingest } = deps;
  const uploads = deps.nars.uploads;
  // REST uploads give up after upload.restWaitSecs with 503 upload_busy; `nix copy` waits.
  const admitted = async <T>(target: IngestTarget, bytes: number, mode: AdmissionMode, work: () => Promise<T>): Promise<T> => {
    try {
      return await ingest.admitted(bytes, mode, target.owner, work);
    } catch (e) {
      if (e instanceof UploadBusy) {
        throw new ApiError('upload_busy', `no upload permit came within ${e.waitedSecs} s (upload.restWaitSecs); the server is busy with other uploads, retry later`, {
          headers: { 'Retry-After': String(e.waitedSecs) },
        });
      }
      throw e;
    }
  };

  const service: NarUploadService = {
    async restTarget(who, name) {
      const found = await demandCache(deps.sql, who, name, 'writeStore');
      if (!found.row.active) throw new ApiError('cache_inactive', `cache "${found.row.name}" is disabled and takes no uploads; enable it with POST /caches/${found.row.name}/active`);
      return { id: found.row.id, name: found.row.name, ...(who.kind === 'user' ? { uploader: who.username, owner: who.userId } : {}) };
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
      await ingest.demandRoom(target, offset + Math.max(1, declaredBytes ?? 0));
      return admitted(target, declaredBytes ?? CLI_CHUNK_BYTES, 'rest', () =>
        translated(async () => ({ bytes_staged: await uploads.appendChunk(target.id, hash, offset, body) })));
    },

    async finalize(target, hash, body) {
      const info = service.parseUploadInfo(body);
      checkStorePathHash(info, hash);
      if (info.narSize > deps.maxUploadSize) throw narTooLarge(info.narSize, deps.maxUploadSize);
      await ingest.demandRoomFor(target, info);
      return admitted(target, info.narSize, 'rest', () => ingest.ingest(target, info, { staged: hash, submitted: body }));
    },

    abandon: (target, hash) => translated(async () => ({ abandoned: await uploads.abandon(target.id, hash) })),

    parseUploadInfo(body) {
      const parsed = narinfoOfUpload(body);
      if (!parsed.ok) throw new ApiError('invalid_narinfo', `narinfo ${parsed.field}: ${parsed.reason}`);
      return parsed.value;
    },

    singleShot: (target, declaredBytes, read) =>
      admitted(target, declaredBytes ?? deps.maxUploadSize, 'rest', async () => {
        let file: string | null = null;
        try {
          const info = await read(async (nar) => {
            file = await ingest.stage(nar);
          });
          if (file === null) throw new Error('a single-shot reader returned without staging the NAR part');
          await ingest.demandRoomFor(target, info);
          return await ingest.ingest(target, info, { file });
        } finally {
          if (file !== null) await ingest.forget(file);
        }
      }),

    async nixPutNar(target, fileName, declaredBytes, body) {
      const named = parseNixNarFileName(fileName);
      if (!named) throw new ApiError('invalid_parameter', `nar/${fileName}: expected nar/<hash>.nar with an optional .xz, .bz2, .zst, .br or .gz`);
      const { compression } = named;
      // The NarSize comes with the narinfo PUT; a cache already full is refused before the bytes are staged.
      await ingest.demandRoom(target, 1);
      await admitted(target, declaredBytes ?? deps.maxUploadSize, 'wait', () =>
        translated(() => uploads.stageWhole(target.id, `nar/${fileName}`, compression, body)));
    },

    async nixPutNarinfo(target, hash, text) {
      const parsed = parseNarinfo(text);
      if (!parsed.ok) throw new ApiError('invalid_narinfo', `narinfo ${parsed.field}: ${parsed.reason}`);
      // Sig lines are the client's: the cache signs with its own key, so they are dropped unread.
      const info: Narinfo = { ...parsed.value, sigs: [] };
      checkStorePathHash(info, hash);
      if (info.narSize > deps.maxUploadSize) throw narTooLarge(info.narSize, deps.maxUploadSize);
      await ingest.demandRoomFor(target, info);
      return admitted(target, info.narSize, 'wait', () => nixIngest(deps, target, info));
    },

    nixStagedFile: (target, fileName) => uploads.readStaged(target.id, `nar/${fileName}`),
  };
  return service;
}

/** The NAR a `nix copy` narinfo names: staged by its PUT, or a file the cache already serves. */
async function nixIngest(deps: NarUploadDeps, target: IngestTarget, info: Narinfo): Promise<NarUploadResult> {
  const { uploads, reads } = deps.nars;
  const uploadKey = info.url;
  const fileName = uploadKey.startsWith('nar/') ? uploadKey.slice(4) : '';
  if (parseNixNarFileName(fileName) !== undefined && (await uploads.staged(target.id, uploadKey)) !== null) {
    return deps.ingest.ingest(target, info, { staged: uploadKey });
  }
  // Nix skips the NAR PUT when HEAD found the file: kiln's zstd bytes can equal Nix's, and then the
  // file is one this cache already serves, for this path or another one with identical contents.
  const served = parseNarUrl(uploadKey);
  if (served !== undefined && (await reads.narFile(target.id, served)) !== null) {
    return deps.ingest.ingest(target, info, { stored: served });
  }
  const held = await uploads.held(target.id, info);
  if (held !== null) return resultOf(held);
  throw new ApiError('no_staged_upload', `the narinfo's URL ${info.url} names no NAR uploaded to cache "${target.name}"; PUT the NAR file first`);
}
