// The shared evaluation cache (docs/eval-cache.md): the source trees of flakes' locked inputs, as
// NARs keyed by the narHash flake.lock pins, kept per organization so a worker of the same
// organization restores an input instead of fetching it from its origin again. A worker reaches
// them only with the capability of the evaluation it runs (`/eval-inputs/{evaluation}/…?token=`),
// minted at dispatch (jobInputCache) and valid while that evaluation is fetching or evaluating; the
// evaluation's organization scopes every read and write, so knowing another tenant's hash gives
// nothing. Uploads are hashed as they stream and stored only when the bytes are the named NAR.
import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import type { Sql } from 'postgres';
import { ApiError } from '../../protocol/index.js';
import type { BlobRead, BlobStore } from '../../storage/index.js';

/** hashes one query may name (a flake.lock of a large flake has a few hundred nodes) */
export const MAX_QUERY_HASHES = 1000;

export interface EvalInputCacheDeps {
  sql: Sql;
  blobs: BlobStore;
  /** nar.maxUploadSize: the largest input accepted */
  maxBytes: number;
  now?: () => Date;
}

const hashToken = (token: string) => createHash('sha256').update(token).digest();
/** The phases in which the evaluation's worker holds the capability. */
const RUNNING = ['fetching', 'evaluating'];

export function evalInputCacheService(deps: EvalInputCacheDeps) {
  const { sql, blobs } = deps;
  const now = deps.now ?? (() => new Date());

  /** The evaluation's organization for this token while it runs; 404 otherwise (unknown, ended or another token alike). */
  async function organizationOf(evaluationId: string, token: string | null): Promise<string> {
    const missing = () => new ApiError('not_found', `no running evaluation ${evaluationId} for this token`);
    if (!token) throw missing();
    const [row] = await sql<{ organization_id: string; input_cache_token_hash: string | null; phase: string }[]>`
      select p.organization_id, e.input_cache_token_hash, e.phase
      from evaluations e join tasks t on t.id = e.task_id join projects p on p.id = t.project_id
      where e.id = ${evaluationId}`;
    if (!row || row.input_cache_token_hash === null || !RUNNING.includes(row.phase)) throw missing();
    if (!timingSafeEqual(hashToken(token), Buffer.from(row.input_cache_token_hash, 'hex'))) throw missing();
    return row.organization_id;
  }

  return {
    /** Which of `narHashes` the evaluation's organization has. */
    async present(evaluationId: string, token: string | null, narHashes: readonly string[]): Promise<string[]> {
      const org = await organizationOf(evaluationId, token);
      const rows = await sql<{ nar_hash: string }[]>`
        select nar_hash from eval_input_blobs where organization_id = ${org} and nar_hash = any(${narHashes as string[]})`;
      return rows.map((r) => r.nar_hash);
    },

    /** The NAR, marked used now; 404 when the organization has none of that hash. */
    async read(evaluationId: string, token: string | null, narHash: string): Promise<BlobRead> {
      const org = await organizationOf(evaluationId, token);
      const [row] = await sql<{ blob_key: string }[]>`
        update eval_input_blobs set last_used_at = ${now()} where organization_id = ${org} and nar_hash = ${narHash} returning blob_key`;
      const read = row ? await blobs.get(row.blob_key) : null;
      if (!read) throw new ApiError('not_found', `the shared evaluation cache holds no input with NAR hash sha256:${narHash} for this organization`);
      return read;
    },

    /**
     * Stores the NAR if its SHA-256 is `narHash` and it fits in nar.maxUploadSize; nothing is kept
     * otherwise. `stored` is false when the organization had it already (the first copy stays).
     */
    async store(evaluationId: string, token: string | null, narHash: string, body: AsyncIterable<Uint8Array>): Promise<{ stored: boolean; size: number }> {
      const org = await organizationOf(evaluationId, token);
      const key = `eval-inputs/${org}/${narHash}-${randomUUID()}`;
      const hash = createHash('sha256');
      let size = 0;
      const checked = async function* (): AsyncGenerator<Uint8Array> {
        for await (const chunk of body) {
          size += chunk.length;
          if (size > deps.maxBytes) throw new ApiError('nar_too_large', `the input's NAR exceeds nar.maxUploadSize (${deps.maxBytes} bytes)`);
          hash.update(chunk);
          yield chunk;
        }
        // Before the generator ends, so the blob store discards the bytes instead of committing them.
        const actual = hash.digest('hex');
        if (actual !== narHash) {
          throw new ApiError('eval_input_mismatch', `the uploaded NAR's SHA-256 is ${actual}, not the ${narHash} named in the path; nothing was stored`);
        }
      };
      await blobs.put(key, checked());
      const at = now();
      let inserted: { fresh: boolean }[];
      try {
        inserted = await sql<{ fresh: boolean }[]>`
          insert into eval_input_blobs (organization_id, nar_hash, blob_key, size, created_at, last_used_at)
          values (${org}, ${narHash}, ${key}, ${size}, ${at}, ${at})
          on conflict (organization_id, nar_hash) do update set last_used_at = excluded.last_used_at
          returning (xmax = 0) as fresh`;
      } catch (e) {
        await blobs.delete(key);
        throw e;
      }
      const fresh = inserted[0]?.fresh === true;
      if (!fresh) await blobs.delete(key);
      return { stored: fresh, size };
    },
  };
}

export type EvalInputCacheService = ReturnType<typeof evalInputCacheService>;

/** The capability of one dispatch of an evaluation: a fresh token each time, the previous one stops working. */
export async function jobInputCache(sql: Sql, serveUrl: string, evaluationId: string): Promise<{ url: string; token: string }> {
  const token = randomBytes(32).toString('base64url');
  await sql`update evaluations set input_cache_token_hash = ${hashToken(token).toString('hex')} where id = ${evaluationId}`;
  return { url: `${serveUrl.replace(/\/+$/, '')}/eval-inputs/${evaluationId}`, token };
}

export interface EvalInputLimits {
  /** eval.cache.maxAgeDays; 0: no age limit */
  maxAgeDays: number;
  /** eval.cache.maxTotalBytes; 0: no size limit */
  maxTotalBytes: number;
}

export interface EvalInputSweepReport {
  /** blobs unused for maxAgeDays */
  aged: number;
  /** blobs dropped, least recently used first, to bring the total under maxTotalBytes */
  evictedForSize: number;
  /** blobs without a row (their organization was deleted, or an earlier deletion failed) */
  orphans: number;
}

/** A blob without a row younger than this may be an upload whose row is about to be written. */
export const ORPHAN_GRACE_MS = 3_600_000;

/**
 * One eviction pass: blobs unused for maxAgeDays go, then the least recently used until the total
 * (over every organization) is within maxTotalBytes. Rows first, then their blobs: a blob without
 * a row is unreachable (and swept as an orphan), a row without its blob would answer 404 anyway.
 */
export async function sweepEvalInputs(sql: Sql, blobs: Pick<BlobStore, 'delete' | 'list'>, limits: EvalInputLimits, at: Date): Promise<EvalInputSweepReport> {
  let aged: { blob_key: string }[] = [];
  if (limits.maxAgeDays > 0) {
    const cutoff = new Date(at.getTime() - limits.maxAgeDays * 86_400_000);
    aged = await sql<{ blob_key: string }[]>`delete from eval_input_blobs where last_used_at < ${cutoff} returning blob_key`;
  }
  let oversize: { blob_key: string }[] = [];
  if (limits.maxTotalBytes > 0) {
    // keep the most recently used blobs whose running total fits; drop the rest
    oversize = await sql<{ blob_key: string }[]>`
      delete from eval_input_blobs b using (
        select organization_id, nar_hash, sum(size) over (order by last_used_at desc, created_at desc, nar_hash) as running
        from eval_input_blobs) r
      where b.organization_id = r.organization_id and b.nar_hash = r.nar_hash and r.running > ${limits.maxTotalBytes}
      returning b.blob_key`;
  }
  for (const row of [...aged, ...oversize]) await blobs.delete(row.blob_key);
  // Rows go with their organization (on delete cascade), the bytes stay: swept here, as are the
  // blobs of a pass whose deletions failed. The rows are read before the listing, so an upload
  // newer than the grace period is never taken for an orphan.
  const known = new Set((await sql<{ blob_key: string }[]>`select blob_key from eval_input_blobs`).map((r) => r.blob_key));
  let orphans = 0;
  for await (const entry of blobs.list('eval-inputs/')) {
    if (known.has(entry.key) || entry.modified.getTime() > at.getTime() - ORPHAN_GRACE_MS) continue;
    await blobs.delete(entry.key);
    orphans++;
  }
  return { aged: aged.length, evictedForSize: oversize.length, orphans };
}
