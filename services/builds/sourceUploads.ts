// Source uploads for the CLI's build command (docs/builds.md, "Source uploads"): a tarball of a
// working tree goes to blob storage under build-sources/, and the answer carries a capability URL
// a worker fetches without an account (`GET /build-sources/{id}?token=…`, at the root like the
// binary cache). The token is shown once and stored as a SHA-256 hash. Uploads expire after a day
// and are swept when the next upload arrives, unless an open evaluation of theirs still needs them.
// A worker evaluating an upload gets a fetch token of its own, minted at dispatch (jobSourceUrl).
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Sql } from 'postgres';
import { ApiError } from '../../protocol/index.js';
import type { BlobRead, BlobStore } from '../../storage/index.js';
import { userIdOf } from '../access/index.js';
import type { Principal } from '../access/index.js';
import { demandProjectPath } from '../projects/index.js';

export const SOURCE_UPLOAD_TTL_SECS = 24 * 3600;
const SNIFF_BYTES = 512;

export interface SourceUploadView {
  id: string;
  project: string;
  size: number;
  sha256: string;
  format: string;
  /** GET it without credentials until expires_at */
  url: string;
  expires_at: Date;
}

export interface SourceUploadsDeps {
  sql: Sql;
  blobs: BlobStore;
  /** serveUrl: where workers reach this server */
  serveUrl: string;
  /** http.maxSourceUploadSize, for the message of a 413 found while streaming */
  maxBytes: number;
  now?: () => Date;
}

/** The archive format from its first bytes: gzip, zstd, xz, bzip2, or an uncompressed tar. */
export function sourceFormat(head: Buffer): string | null {
  if (head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b) return 'gzip';
  if (head.length >= 4 && head.readUInt32LE(0) === 0xfd2fb528) return 'zstd';
  if (head.length >= 6 && head.subarray(0, 6).equals(Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]))) return 'xz';
  if (head.length >= 3 && head.subarray(0, 3).toString('latin1') === 'BZh') return 'bzip2';
  if (head.length >= 262 && head.subarray(257, 262).toString('latin1') === 'ustar') return 'tar';
  return null;
}

const hashToken = (token: string) => createHash('sha256').update(token).digest();

export function sourceUploadsService(deps: SourceUploadsDeps) {
  const { sql, blobs } = deps;
  const now = deps.now ?? (() => new Date());

  /** Drops expired uploads: rows first, then their blobs (a blob without a row is unreachable). */
  async function sweepExpired(): Promise<void> {
    const gone = await sql<{ blob_key: string }[]>`
      delete from source_uploads where id in (
        select id from source_uploads s where s.expires_at < ${now()} and not exists (
          select 1 from evaluations e where e.source_upload_id = s.id and e.phase not in ('completed', 'failed', 'aborted'))
        limit 100) returning blob_key`;
    for (const row of gone) await blobs.delete(row.blob_key);
  }

  return {
    async upload(who: Principal, projectRef: string, body: AsyncIterable<Uint8Array>): Promise<SourceUploadView> {
      const userId = userIdOf(who);
      const project = await demandProjectPath(sql, who, projectRef, 'triggerEvaluation');
      await sweepExpired();
      const [idRow] = await sql<{ id: string }[]>`select gen_random_uuid() as id`;
      const id = idRow!.id;
      const key = `build-sources/${id}`;
      const hash = createHash('sha256');
      let size = 0;
      let format: string | null = null;
      // Hashes, counts and sniffs the format as the bytes go to the blob store.
      const checked = async function* (): AsyncGenerator<Uint8Array> {
        let head = Buffer.alloc(0);
        try {
          for await (const chunk of body) {
            size += chunk.length;
            hash.update(chunk);
            if (format === null) {
              head = Buffer.concat([head, chunk]);
              if (head.length >= SNIFF_BYTES) {
                format = sourceFormat(head);
                if (format === null) throw unsupported();
                yield head;
              }
              continue;
            }
            yield chunk;
          }
        } catch (e) {
          if (e instanceof ApiError && e.status === 413) {
            throw new ApiError('source_too_large', `the source upload exceeds http.maxSourceUploadSize (${deps.maxBytes} bytes); upload a smaller tarball (leave out build results and .git) or raise the option`);
          }
          throw e;
        }
        if (format === null) {
          if (size === 0) throw new ApiError('empty_source', 'the request body is empty; send the source tarball as the body');
          format = sourceFormat(head);
          if (format === null) throw unsupported();
          yield head;
        }
      };
      await blobs.put(key, checked());
      const token = randomBytes(32).toString('base64url');
      const expires = new Date(now().getTime() + SOURCE_UPLOAD_TTL_SECS * 1000);
      const sha256 = hash.digest('hex');
      try {
        await sql`
          insert into source_uploads (id, project_id, created_by, blob_key, size, sha256, format, token_hash, expires_at)
          values (${id}, ${project.id}, ${userId}, ${key}, ${size}, ${sha256}, ${format!}, ${hashToken(token).toString('hex')}, ${expires})`;
      } catch (e) {
        await blobs.delete(key);
        throw e;
      }
      return {
        id, project: `${project.organization}/${project.name}`, size, sha256, format: format!,
        url: `${deps.serveUrl.replace(/\/+$/, '')}/build-sources/${id}?token=${token}`, expires_at: expires,
      };
    },

    /** The upload's bytes for whoever holds the token; 404 for an unknown id, a wrong token or an expired upload alike. */
    async fetch(id: string, token: string | null): Promise<{ read: BlobRead; format: string; sha256: string }> {
      const missing = () => new ApiError('not_found', `no source upload ${id} for this token (it may have expired)`);
      if (!token) throw missing();
      const [row] = await sql<{ blob_key: string; token_hash: string; job_token_hash: string | null; expires_at: Date; format: string; sha256: string; in_use: boolean }[]>`
        select blob_key, token_hash, job_token_hash, expires_at, format, sha256,
          exists (select 1 from evaluations e where e.source_upload_id = s.id and e.phase not in ('completed', 'failed', 'aborted')) as in_use
        from source_uploads s where id = ${id}`;
      if (!row) throw missing();
      const given = hashToken(token);
      const matches = (stored: string | null) => stored !== null && timingSafeEqual(given, Buffer.from(stored, 'hex'));
      // the uploader's token until the upload expires; a worker's while an evaluation of it is open
      const allowed = (matches(row.token_hash) && row.expires_at >= now()) || (matches(row.job_token_hash) && row.in_use);
      if (!allowed) throw missing();
      const read = await blobs.get(row.blob_key);
      if (!read) throw missing();
      return { read, format: row.format, sha256: row.sha256 };
    },
  };
}
/**
 * The URL a worker fetches an upload through for one evaluation job: a fresh token each dispatch
 * (the uploader's was shown once and is kept only hashed); the previous job's token stops working.
 * null when the upload is gone.
 */
export async function jobSourceUrl(sql: Sql, serveUrl: string, uploadId: string): Promise<{ url: string; sha256: string } | null> {
  const token = randomBytes(32).toString('base64url');
  const [row] = await sql<{ sha256: string }[]>`
    update source_uploads set job_token_hash = ${hashToken(token).toString('hex')} where id = ${uploadId} returning sha256`;
  return row ? { url: `${serveUrl.replace(/\/+$/, '')}/build-sources/${uploadId}?token=${token}`, sha256: row.sha256 } : null;
}

export type SourceUploadsService = ReturnType<typeof sourceUploadsService>;

const unsupported = () =>
  new ApiError('unsupported_source_format', 'the body is not a tarball: expected a tar archive, plain or compressed with gzip, zstd, xz or bzip2');
