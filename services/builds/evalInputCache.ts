// The shared evaluation cache (docs/eval-cache.md): the source trees of flakes' locked inputs, as
// NARs keyed by the narHash flake.lock pins, kept per organization so a worker of the same
// organization restores an input instead of fetching it from its origin again. A worker reaches
// them only with the capability of the evaluation it runs (`/eval-inputs/{evaluation}/…?token=`),
// minted at dispatch (mintInputCache, written by the dispatch's phase change) and valid while that evaluation is fetching or evaluating; the
// evaluation's organization scopes every read and write, so knowing another tenant's hash gives
// nothing. A dispatch uploads only what its queries found missing, within a byte budget; uploads
// are hashed as they stream and stored only when the bytes are the named NAR.
import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import type { Sql } from 'postgres';
import { ApiError } from '../../protocol/index.js';
import type { EvaluationPhase } from '../../protocol/index.js';
import type { BlobRead, BlobStore } from '../../storage/index.js';
import { INPUT_CACHE_PHASES } from './evaluationPhases.js';

/** hashes one query may name (a flake.lock of a large flake has a few hundred nodes) */
export const MAX_QUERY_HASHES = 1000;

export interface EvalInputCacheDeps {
  sql: Sql;
  blobs: BlobStore;
  /** nar.maxUploadSize: the largest input accepted */
  maxBytes: number;
  /** eval.cache.maxTotalBytes (0: no limit): one dispatch never uploads more than the whole cache keeps */
  maxTotalBytes: number;
  now?: () => Date;
}

/** One dispatch's upload budget, in NARs of nar.maxUploadSize (docs/eval-cache.md, "Upload budget"). */
const UPLOAD_BUDGET_NARS = 4;

/** The bytes one dispatch of an evaluation may store: UPLOAD_BUDGET_NARS × nar.maxUploadSize, at most eval.cache.maxTotalBytes. */
function uploadBudget(maxBytes: number, maxTotalBytes: number): number {
  const budget = UPLOAD_BUDGET_NARS * maxBytes;
  return maxTotalBytes > 0 ? Math.min(budget, maxTotalBytes) : budget;
}

const hashToken = (token: string) => createHash('sha256').update(token).digest();

/** The capability no longer allows the upload when its row is written (rolls the insert back). */
class StaleCapability extends Error {}

/** A running evaluation's capability, as its token names it. */
interface Capability {
  organization: string;
  tokenHash: string;
  /** whether the narHash asked about is one this dispatch may upload */
  wanted: boolean;
  /** bytes this dispatch has stored so far */
  bytes: number;
}

export function evalInputCacheService(deps: EvalInputCacheDeps) {
  const { sql, blobs } = deps;
  const now = deps.now ?? (() => new Date());
  const budget = uploadBudget(deps.maxBytes, deps.maxTotalBytes);
  const missing = (evaluationId: string) => new ApiError('not_found', `no running evaluation ${evaluationId} for this token`);

  /** The running evaluation's capability for this token; 404 otherwise (unknown, ended or another token alike). */
  async function capability(evaluationId: string, token: string | null, narHash: string | null = null): Promise<Capability> {
    if (!token) throw missing(evaluationId);
    const [row] = await sql<{ organization_id: string; input_cache_token_hash: string | null; phase: string; wanted: boolean; input_cache_bytes: string }[]>`
      select p.organization_id, e.input_cache_token_hash, e.phase, ${narHash}::text = any(e.input_cache_wanted) as wanted, e.input_cache_bytes
      from evaluations e join tasks t on t.id = e.task_id join projects p on p.id = t.project_id
      where e.id = ${evaluationId}`;
    if (!row || row.input_cache_token_hash === null || !INPUT_CACHE_PHASES.includes(row.phase as EvaluationPhase)) throw missing(evaluationId);
    if (!timingSafeEqual(hashToken(token), Buffer.from(row.input_cache_token_hash, 'hex'))) throw missing(evaluationId);
    return { organization: row.organization_id, tokenHash: row.input_cache_token_hash, wanted: row.wanted === true, bytes: Number(row.input_cache_bytes) };
  }

  /** Why an upload may not go on (null: it may), from the capability as it is now. */
  function refusal(cap: Capability, narHash: string, size: number): ApiError | null {
    if (!cap.wanted) {
      return new ApiError('eval_input_unwanted', `sha256:${narHash} is not an input this evaluation job may upload: upload only what its query named and the organization lacked, each once`);
    }
    if (cap.bytes + size > budget) {
      return new ApiError('eval_inputs_full', `this evaluation job may store ${budget} bytes in the shared evaluation cache and has stored ${cap.bytes}; this NAR does not fit`);
    }
    return null;
  }

  return {
    /**
     * Which of `narHashes` the evaluation's organization has. Those it lacks become what this
     * dispatch may upload (at most MAX_QUERY_HASHES over all its queries).
     */
    async present(evaluationId: string, token: string | null, narHashes: readonly string[]): Promise<string[]> {
      const cap = await capability(evaluationId, token);
      const rows = await sql<{ nar_hash: string }[]>`
        select nar_hash from eval_input_blobs where organization_id = ${cap.organization} and nar_hash = any(${narHashes as string[]})`;
      const present = rows.map((r) => r.nar_hash);
      const have = new Set(present);
      const lacking = [...new Set(narHashes)].filter((h) => !have.has(h));
      if (lacking.length > 0) {
        // in one statement on the row: concurrent queries add to each other's, the first ones kept
        await sql`
          update evaluations set input_cache_wanted = (
            select coalesce(array_agg(h order by n), '{}') from (
              select h, min(n) as n from unnest(input_cache_wanted || ${lacking}::text[]) with ordinality as u(h, n)
              group by h order by min(n) limit ${MAX_QUERY_HASHES}) kept)
          where id = ${evaluationId} and input_cache_token_hash = ${cap.tokenHash}`;
      }
      return present;
    },

    /** The NAR, marked used now; 404 when the organization has none of that hash. */
    async read(evaluationId: string, token: string | null, narHash: string): Promise<BlobRead> {
      const { organization } = await capability(evaluationId, token);
      const [row] = await sql<{ blob_key: string }[]>`
        update eval_input_blobs set last_used_at = ${now()} where organization_id = ${organization} and nar_hash = ${narHash} returning blob_key`;
      const read = row ? await blobs.get(row.blob_key) : null;
      if (!read) throw new ApiError('not_found', `the shared evaluation cache holds no input with NAR hash sha256:${narHash} for this organization`);
      return read;
    },

    /**
     * Stores the NAR if this dispatch may upload `narHash` (its query named it, the organization
     * lacked it, not uploaded yet), its SHA-256 is `narHash`, and it fits in nar.maxUploadSize and
     * what is left of the dispatch's budget; nothing is kept otherwise. The capability is checked
     * again when the row is written: an upload still streaming when the evaluation ended is dropped.
     * `stored` is false when the organization had it already (the first copy stays).
     */
    async store(evaluationId: string, token: string | null, narHash: string, body: AsyncIterable<Uint8Array>): Promise<{ stored: boolean; size: number }> {
      const cap = await capability(evaluationId, token, narHash);
      const refused = refusal(cap, narHash, 1);
      if (refused) throw refused;
      const key = `eval-inputs/${cap.organization}/${narHash}-${randomUUID()}`;
      const hash = createHash('sha256');
      let size = 0;
      const checked = async function* (): AsyncGenerator<Uint8Array> {
        for await (const chunk of body) {
          size += chunk.length;
          if (size > deps.maxBytes) throw new ApiError('nar_too_large', `the input's NAR exceeds nar.maxUploadSize (${deps.maxBytes} bytes)`);
          const over = refusal(cap, narHash, size);
          if (over) throw over;
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
      let fresh: boolean;
      try {
        fresh = await sql.begin(async (tx) => {
          const at = now();
          const [row] = await tx<{ fresh: boolean }[]>`
            insert into eval_input_blobs (organization_id, nar_hash, blob_key, size, created_at, last_used_at)
            values (${cap.organization}, ${narHash}, ${key}, ${size}, ${at}, ${at})
            on conflict (organization_id, nar_hash) do update set last_used_at = excluded.last_used_at
            returning (xmax = 0) as fresh`;
          const added = row?.fresh === true;
          // the capability again, as it is now, and the budget taken: under the row's lock
          const counted = await tx`
            update evaluations set input_cache_bytes = input_cache_bytes + ${added ? size : 0},
              input_cache_wanted = array_remove(input_cache_wanted, ${narHash}::text)
            where id = ${evaluationId} and input_cache_token_hash = ${cap.tokenHash} and phase = any(${INPUT_CACHE_PHASES as EvaluationPhase[]})
              and ${narHash}::text = any(input_cache_wanted) and input_cache_bytes + ${added ? size : 0} <= ${budget}
            returning id`;
          if (counted.length === 0) throw new StaleCapability();
          return added;
        });
      } catch (e) {
        await blobs.delete(key);
        // the evaluation ended, was dispatched again, or a concurrent upload took the hash or the budget: say which
        if (e instanceof StaleCapability) throw refusal(await capability(evaluationId, token, narHash), narHash, size) ?? missing(evaluationId);
        throw e;
      }
      if (!fresh) await blobs.delete(key);
      return { stored: fresh, size };
    },
  };
}

export type EvalInputCacheService = ReturnType<typeof evalInputCacheService>;

/**
 * The capability of one dispatch of an evaluation: a fresh token each time. The caller writes its
 * hash with the dispatch (changePhase's inputCacheTokenHash), which makes the previous one stop working.
 */
export function mintInputCache(serveUrl: string, evaluationId: string): { access: { url: string; token: string }; tokenHash: string } {
  const token = randomBytes(32).toString('base64url');
  return { access: { url: `${serveUrl.replace(/\/+$/, '')}/eval-inputs/${evaluationId}`, token }, tokenHash: hashToken(token).toString('hex') };
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
  /** blobs dropped, the largest users' least recently used first, to bring the total under maxTotalBytes */
  evictedForSize: number;
  /** blobs without a row (their organization was deleted, or an earlier deletion failed) */
  orphans: number;
}

/** A blob without a row younger than this may be an upload whose row is about to be written. */
export const ORPHAN_GRACE_MS = 3_600_000;

/**
 * One eviction pass: blobs unused for maxAgeDays go, then, until the total (over every
 * organization) is within maxTotalBytes, the least recently used of the organizations that hold
 * the most (docs/eval-cache.md, "Eviction"). Rows first, then their blobs: a blob without a row is
 * unreachable (and swept as an orphan), a row without its blob would answer 404 anyway.
 */
export async function sweepEvalInputs(sql: Sql, blobs: Pick<BlobStore, 'delete' | 'list'>, limits: EvalInputLimits, at: Date): Promise<EvalInputSweepReport> {
  let aged: { blob_key: string }[] = [];
  if (limits.maxAgeDays > 0) {
    const cutoff = new Date(at.getTime() - limits.maxAgeDays * 86_400_000);
    aged = await sql<{ blob_key: string }[]>`delete from eval_input_blobs where last_used_at < ${cutoff} returning blob_key`;
  }
  let oversize: { blob_key: string }[] = [];
  if (limits.maxTotalBytes > 0) {
    // Fair shares by water-filling: `held` is what the blob's organization holds counting this blob
    // and its more recently used ones. Kept in the order of `held`, every organization keeps its
    // newest blobs up to the same level, so one that uploads a lot loses its own oldest blobs
    // first and cannot push a small organization's few out of the cache.
    oversize = await sql<{ blob_key: string }[]>`
      delete from eval_input_blobs b using (
        select organization_id, nar_hash, sum(size) over (order by held, last_used_at desc, organization_id, nar_hash) as running
        from (
          select organization_id, nar_hash, last_used_at, size,
            sum(size) over (partition by organization_id order by last_used_at desc, created_at desc, nar_hash) as held
          from eval_input_blobs) o) r
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
