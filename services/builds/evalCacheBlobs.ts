// The shared evaluation cache on the server (docs/worker.md, "The shared evaluation cache"): the
// eval-cache SQLite files workers upload after an evaluation (evalCachePut, gzipped), kept in blob
// storage under eval-cache/<project>/<fingerprint> and offered with the next evalJob of the same
// project at the same commit. Never across projects: the cache holds attribute names and values of
// the tenant's flake, and a forged one would hand an evaluation derivations it never wrote, so a
// blob is keyed by the project of the job that uploaded it and read only for that project's jobs.
// The sweep (eval.cache.sweepIntervalSecs, services/assembly/upkeep.ts) drops blobs unused for
// eval.cache.maxAgeDays, those of deleted projects, and the least recently used beyond
// eval.cache.maxTotalBytes.
import type { Sql } from 'postgres';
import { EVAL_CACHE_MAX_BLOB_BYTES } from '../../protocol/index.js';
import type { BlobStore } from '../../storage/index.js';

export interface EvalCacheSettings {
  /** eval.cache.maxAgeDays */
  maxAgeDays: number;
  /** eval.cache.maxTotalBytes */
  maxTotalBytes: number;
}

export interface EvalCacheBlob {
  fingerprint: string;
  data: Buffer;
}

export interface EvalCacheSweepReport {
  deleted: number;
  deletedBytes: number;
}

const DAY_MS = 24 * 3600 * 1000;
/** Rows one sweep statement takes at most: a large backlog goes in slices. */
const SWEEP_SLICE = 500;
const GZIP_MAGIC = [0x1f, 0x8b];

const blobKey = (projectId: string, fingerprint: string) => `eval-cache/${projectId}/${fingerprint}`;

async function readAll(body: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of body) parts.push(Buffer.from(part));
  return Buffer.concat(parts);
}

export class EvalCacheBlobs {
  constructor(
    private readonly sql: Sql,
    private readonly blobs: BlobStore,
    private readonly settings: EvalCacheSettings,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /** The blob an evaluation of `projectId` at `commit` starts with: the one used or made last; null if none. */
  async offer(projectId: string, commit: string | null): Promise<EvalCacheBlob | null> {
    if (commit === null) return null;
    const [row] = await this.sql<{ fingerprint: string; blob_key: string }[]>`
      update eval_cache_blobs set used_at = ${this.now()}
      where (project_id, fingerprint) = (
        select project_id, fingerprint from eval_cache_blobs where project_id = ${projectId} and commit = ${commit} order by used_at desc limit 1)
      returning fingerprint, blob_key`;
    if (!row) return null;
    const read = await this.blobs.get(row.blob_key);
    // the sweep took it between the two statements: nothing to offer
    if (!read || read.size > EVAL_CACHE_MAX_BLOB_BYTES) return null;
    return { fingerprint: row.fingerprint, data: await readAll(read.body) };
  }

  /**
   * Keeps what an evaluation job of `projectId` uploaded. The blob first, then the row, so a row
   * never names a missing blob; a gzip header is all the server checks (the worker checks the rest).
   */
  async store(projectId: string, commit: string | null, fingerprint: string, data: Uint8Array): Promise<void> {
    if (data.byteLength > EVAL_CACHE_MAX_BLOB_BYTES) throw new Error(`an evaluation-cache blob is at most ${EVAL_CACHE_MAX_BLOB_BYTES} bytes`);
    if (data[0] !== GZIP_MAGIC[0] || data[1] !== GZIP_MAGIC[1]) throw new Error('an evaluation-cache blob is gzip data');
    const key = blobKey(projectId, fingerprint);
    await this.blobs.put(key, (async function* () { yield data; })(), data.byteLength);
    const at = this.now();
    await this.sql`
      insert into eval_cache_blobs (project_id, fingerprint, commit, blob_key, size, created_at, used_at)
      values (${projectId}, ${fingerprint}, ${commit}, ${key}, ${data.byteLength}, ${at}, ${at})
      on conflict (project_id, fingerprint) do update set commit = coalesce(excluded.commit, eval_cache_blobs.commit),
        size = excluded.size, used_at = excluded.used_at`;
  }

  /** One eviction pass: age, deleted projects, then total size by least recent use. Rows go first, then their blobs. */
  async sweep(): Promise<EvalCacheSweepReport> {
    const report: EvalCacheSweepReport = { deleted: 0, deletedBytes: 0 };
    const drop = async (rows: { blob_key: string; size: string | number }[]) => {
      for (const row of rows) {
        await this.blobs.delete(row.blob_key);
        report.deleted += 1;
        report.deletedBytes += Number(row.size);
      }
      return rows.length;
    };
    const cutoff = new Date(this.now().getTime() - this.settings.maxAgeDays * DAY_MS);
    while (await drop(await this.sql<{ blob_key: string; size: string }[]>`
      delete from eval_cache_blobs where (project_id, fingerprint) in (
        select b.project_id, b.fingerprint from eval_cache_blobs b
        where b.used_at < ${cutoff} or not exists (select 1 from projects p where p.id = b.project_id) limit ${SWEEP_SLICE})
      returning blob_key, size`) === SWEEP_SLICE);
    // Beyond the total: the least recently used go, until the rest fits.
    await drop(await this.sql<{ blob_key: string; size: string }[]>`
      delete from eval_cache_blobs where (project_id, fingerprint) in (
        select project_id, fingerprint from (
          select project_id, fingerprint, sum(size) over (order by used_at desc, project_id, fingerprint) as running from eval_cache_blobs) ranked
        where running > ${this.settings.maxTotalBytes})
      returning blob_key, size`);
    return report;
  }
}
