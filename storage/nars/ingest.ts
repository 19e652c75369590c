// Ingesting a staged file into a cache: the CPU work (ingestPass.ts), the checks against the
// narinfo (NarHash, NarSize, references; the store path was checked by the caller against the
// URL), the cache's signature, then commitIngest. A failed check stores nothing and leaves the
// staged file alone, so the client can finalize again with a corrected narinfo.
import { rm } from 'node:fs/promises';
import type { Sql } from 'postgres';
import { parseStorePath, signNarinfo, type Narinfo, type SigningKey } from '../../protocol/index.js';
import type { BlobStore } from '../blobs/index.js';
import type { CpuPool } from '../cpuPool.js';
import { commitIngest, type IngestCommit } from './commitIngest.js';
import { runIngestPass } from './ingestPass.js';
import type { NarFrameSets } from './narFrameSets.js';
import type { StagingArea } from './narLocations.js';
import type { CheckedNar } from './stagedCheck.js';
import { heldOutcome, holdsExactly } from './heldCopy.js';
import type { IngestOutcome } from './ingestOutcome.js';
import { findHeldPath } from './sql/index.js';
import { UploadProblem } from './uploadProblem.js';

/**
 * zstd level of stored NARs. 1, not zstd's and Nix's default of 3: level 3 costs about 30 % more
 * CPU per ingested byte for files a few percent smaller (docs/binary-cache.md, bench/HISTORY.md).
 */
export const STORED_ZSTD_LEVEL = 1;

export interface IngestDeps {
  sql: Sql;
  blobs: BlobStore;
  cpu: CpuPool;
  staging: StagingArea;
  frames: NarFrameSets;
}

export interface IngestRequest {
  cacheId: string;
  signingKey: SigningKey;
  /** the narinfo the upload claims; its Sig lines are ignored (the cache signs for itself) */
  info: Narinfo;
  /** the staged file and how it is compressed, or a small uncompressed NAR in memory (compression none) */
  source: string | Uint8Array;
  compression: string;
  /** the frames directory of a staged upload (compressed while its chunks arrived) */
  framesDir?: string;
  /** the check pass of a chunked upload, run as its chunks arrived (stagedChecks.ts) */
  checked?: CheckedNar;
}

export async function ingestIntoCache(deps: IngestDeps, request: IngestRequest): Promise<IngestOutcome> {
  const prepared = await prepareIngest(deps, request);
  if ('held' in prepared) return prepared.held;
  return { ...prepared.outcome, ...(await commitIngest(deps.sql, deps.blobs, prepared.commit)) };
}

/**
 * An ingest up to its commit: the held copy when the cache has this very narinfo already, or the
 * checked NAR's commit (its zstd file written, owned by the caller until commitIngest or
 * commitIngestBatch takes it; discardPrepared removes it).
 */
export type PreparedIngest =
  | { held: IngestOutcome }
  | { commit: IngestCommit; outcome: Pick<IngestOutcome, 'storePath' | 'narHash' | 'narSize'> };

export async function prepareIngest(deps: IngestDeps, request: IngestRequest): Promise<PreparedIngest> {
  const { info, cacheId } = request;
  const storePath = parseStorePath(info.storePath);
  if (!storePath.ok) throw new Error(`ingestIntoCache needs a parsed narinfo; StorePath: ${storePath.reason}`);
  const hashPart = storePath.value.hashPart;

  // Already held: an upload retried after a lost answer, or `nix copy` of a path the cache has. The
  // same NAR with another narinfo goes on: it replaces the cache's own copy (commitIngest).
  const held = await findHeldPath(deps.sql, cacheId, hashPart);
  if (held) {
    if (held.narHash !== info.narHash) {
      throw new UploadProblem('path_exists', `the cache already holds ${info.storePath} with NarHash ${held.narHash}, not ${info.narHash}; delete it from the cache first`);
    }
    if (holdsExactly(held, info)) return { held: heldOutcome(held) };
  }

  const result = await runIngestPass(deps.cpu, deps.frames, deps.staging, {
    source: request.source,
    compression: request.compression,
    narSize: info.narSize,
    references: info.references.map((ref) => ref.slice(0, 32)),
    zstdLevel: STORED_ZSTD_LEVEL,
    ...(request.framesDir === undefined ? {} : { framesDir: request.framesDir }),
    ...(request.checked === undefined ? {} : { checked: request.checked }),
  });
  if (!result.ok) {
    const kind = result.field === 'NarSize' ? 'nar_mismatch' : /^unsupported compression/.test(result.reason) ? 'unsupported_compression' : 'invalid_nar';
    throw new UploadProblem(kind, result.field === 'nar' ? result.reason : `${result.field}: ${result.reason}`);
  }
  const zstdFile = result.zstdFile;
  const problem = mismatchOf(info, result);
  if (problem !== null) {
    await rm(zstdFile, { force: true });
    throw new UploadProblem('nar_mismatch', problem);
  }

  return {
    outcome: { storePath: info.storePath, narHash: result.narHash, narSize: result.narSize },
    commit: {
      cacheId,
      hashPart,
      storePath: info.storePath,
      narHash: result.narHash,
      narSize: result.narSize,
      references: [...info.references].sort(),
      deriver: info.deriver ?? null,
      ca: info.ca ?? null,
      fileHash: result.fileHash,
      fileSize: result.fileSize,
      listing: result.listing,
      signature: signNarinfo(info, request.signingKey),
      zstdFile,
    },
  };
}

/** Removes what a prepared ingest that will not be committed wrote. */
export async function discardPrepared(prepared: PreparedIngest): Promise<void> {
  if ('commit' in prepared) await rm(prepared.commit.zstdFile, { force: true });
}

/** What the NAR contradicts in the narinfo, naming the field; null when it agrees. */
function mismatchOf(info: Narinfo, result: { narHash: string; narSize: number; missingReferences: string[] }): string | null {
  if (result.narSize !== info.narSize) return `NarSize: the NAR has ${result.narSize} bytes, the narinfo says ${info.narSize}`;
  if (result.narHash !== info.narHash) return `NarHash: the NAR hashes to ${result.narHash}, the narinfo says ${info.narHash}`;
  if (result.missingReferences.length === 0) return null;
  const names = info.references.filter((ref) => result.missingReferences.includes(ref.slice(0, 32)));
  return `References: ${names.join(', ')} ${names.length === 1 ? 'does' : 'do'} not occur in the NAR, so ${names.length === 1 ? 'it is not a reference' : 'they are not references'} of ${info.storePath}`;
}
