// Read side of builds: an evaluation's builds, one build, its log and direct dependencies, entry
// points, and the store path of one attribute at one commit. A build is visible to whoever may
// see its evaluation's project; anyone else gets 404.
import type { Fragment, Sql } from 'postgres';
import { ApiError, buildStatuses, DEFAULT_STORE_DIR, type BuildStatus, type EntryPointView, type EvaluationBuildsQuery } from '../../protocol/index.js';

/** `<hash>-<name>.drv`, what Nix asks for at log/{drv} */
const DRV_BASE_NAME = /^[0-9a-df-np-sv-z]{32}-[A-Za-z0-9+\-._?=]{1,211}\.drv$/;
import { readBuildLog } from './buildLogs.js';
import { latestBuildResources, type BuildResourcesView } from './buildStatistics.js';
import { organizationOfEvaluation, seenColumns, statusFor } from './organizationStatus.js';
import type { EvaluationsService } from './evaluations.js';
import type { Principal } from '../access/index.js';
import { demandProject, demandProjectRef } from '../access/index.js';

export interface BuildView {
  build_id: string;
  derivation_build: string;
  evaluation_id: string;
  drv_path: string;
  name: string;
  system: string;
  status: string;
  failure: { class: string; reason: string | null; message: string | null } | null;
  attempts: number;
  entry_point: boolean;
  attr: string | null;
  outputs: Record<string, string | null>;
  worker: string | null;
  log_bytes: number;
  queued_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
  /** GET /builds/{id} only: the latest attempt's resources, null before a worker reported one */
  resources?: BuildResourcesView | null;
}


/** One page of an evaluation's builds (GET /evals/{id}/builds/page). */
export interface BuildsPageView {
  builds: BuildView[];
  page: number;
  per_page: number;
  total: number;
  counts: Record<BuildStatus | 'total', number>;
}

/** A LIKE pattern that matches `text` anywhere, with LIKE's own characters taken literally. */
const containsPattern = (text: string) => `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

interface BuildRow extends Omit<BuildView, 'failure' | 'log_bytes'> {
  failure_class: string | null;
  failure_reason: string | null;
  failure_message: string | null;
  log_bytes: string;
}

/**
 * The status and failure as the evaluation's organization `org` sees them (organizationStatus.ts).
 * `org` is the evaluation's, given once where the query reads one evaluation (an uncorrelated
 * subquery: computed once per query, not once per row and column).
 */
const columns = (sql: Sql, org: Fragment) => sql`
  b.id as build_id, db.id as derivation_build, b.evaluation_id, d.drv_path, d.name, d.system,
  ${seenColumns(sql, org)}, db.attempts, b.entry_point, b.attr, d.outputs, db.worker_id as worker, db.log_bytes, db.queued_at, db.started_at, db.finished_at`;
/** The organization of the evaluation `evaluationId`, for columns. */
const organizationOf = (sql: Sql, evaluationId: string) => organizationOfEvaluation(sql, sql`${evaluationId}::uuid`);
const joins = (sql: Sql) => sql`builds b join derivation_builds db on db.id = b.derivation_build_id join derivations d on d.id = db.derivation_id`;

const toView = ({ failure_class, failure_reason, failure_message, log_bytes, ...rest }: BuildRow): BuildView => ({
  ...rest,
  log_bytes: Number(log_bytes),
  failure: failure_class ? { class: failure_class, reason: failure_reason, message: failure_message } : null,
});

const toEntryPoint = (b: BuildView): EntryPointView => ({
  build_id: b.build_id, derivation_build: b.derivation_build, evaluation_id: b.evaluation_id, attr: b.attr, drv_path: b.drv_path,
  outputs: b.outputs, build_status: b.status,
});

export function buildViewsService(sql: Sql, evaluations: Pick<EvaluationsService, 'visible'>) {
  /** One build with its latest attempt's resources (docs/metrics.md): null before a worker reported one. */
  async function build(who: Principal, id: string): Promise<BuildView> {
    const [row] = await sql<BuildRow[]>`select ${columns(sql, organizationOfEvaluation(sql, sql`b.evaluation_id`))} from ${joins(sql)} where b.id = ${id}`;
    if (!row) throw new ApiError('not_found', `no build ${id}`);
    // A key without viewProject still learns 403 from visible(), as on GET /evals/{id}.
    await evaluations.visible(who, row.evaluation_id, 'viewProject').catch((e: unknown) => {
      if (e instanceof ApiError && e.status !== 404) throw e;
      throw new ApiError('not_found', `no build ${id}`);
    });
    const resources = (await latestBuildResources(sql, [row.derivation_build])).get(row.derivation_build) ?? null;
    return { ...toView(row), resources };
  }

  const entryPoints = async (evaluationId: string) =>
    (await sql<BuildRow[]>`select ${columns(sql, organizationOf(sql, evaluationId))} from ${joins(sql)} where b.evaluation_id = ${evaluationId} and b.entry_point order by b.attr`).map(toView).map(toEntryPoint);

  /** The newest evaluation of a task that recorded its graph. */
  const latestEvaluation = async (taskId: string) => (await sql<{ id: string }[]>`
    select id from evaluations where task_id = ${taskId} and phase in ('building', 'completed') order by created_at desc limit 1`)[0]?.id;

  const taskId = async (projectId: string, task: string) => {
    const [row] = await sql<{ id: string }[]>`select id from tasks where project_id = ${projectId} and name = ${task}`;
    if (!row) throw new ApiError('not_found', `no task "${task}"`);
    return row.id;
  };

  /** Whether `who` may see an evaluation that reached the derivation build (one per project is enough to ask). */
  async function seesBuildOf(who: Principal, derivationBuildId: string): Promise<boolean> {
    if (who.kind === 'anonymous') return false;
    const evaluationsByProject = await sql<{ id: string }[]>`
      select distinct on (t.project_id) e.id from builds b join evaluations e on e.id = b.evaluation_id join tasks t on t.id = e.task_id
      where b.derivation_build_id = ${derivationBuildId} limit 50`;
    for (const { id } of evaluationsByProject) {
      const seen = await evaluations.visible(who, id, 'viewProject').then(() => true, (e: unknown) => {
        if (e instanceof ApiError && (e.status === 404 || e.status === 403)) return false;
        throw e;
      });
      if (seen) return true;
    }
    return false;
  }

  return {
    build,

    async evaluationBuilds(who: Principal, evaluationId: string): Promise<BuildView[]> {
      await evaluations.visible(who, evaluationId, 'viewProject');
      return (await sql<BuildRow[]>`select ${columns(sql, organizationOf(sql, evaluationId))} from ${joins(sql)} where b.evaluation_id = ${evaluationId} order by d.drv_path`).map(toView);
    },

    /**
     * A page of the builds in drv_path order, filtered by status and by text in the name or
     * attribute, with the counts per status of the builds the text matches.
     */
    async evaluationBuildsPage(who: Principal, evaluationId: string, query: EvaluationBuildsQuery): Promise<BuildsPageView> {
      const allowed = evaluations.visible(who, evaluationId, 'viewProject');
      const search = query.search?.trim() ? containsPattern(query.search.trim()) : null;
      const matches = search ? sql`and (d.name ilike ${search} or b.attr ilike ${search})` : sql``;
      const offset = (query.page - 1) * query.per_page;
      // The counts and the page are independent reads: in parallel (the evaluation page's first rows
      // wait for both), and beside the access check, which they do not wait for: nothing they read is
      // returned before it passed. Counts without a text filter need no derivation, so no join with them.
      const status = statusFor(sql, organizationOf(sql, evaluationId));
      const reads = Promise.all([
        sql<{ status: BuildStatus; n: string }[]>`
          select ${status} as status, count(*) as n
          from ${search ? joins(sql) : sql`builds b join derivation_builds db on db.id = b.derivation_build_id`}
          where b.evaluation_id = ${evaluationId} ${matches} group by 1`,
        sql<BuildRow[]>`
          select ${columns(sql, organizationOf(sql, evaluationId))} from ${joins(sql)}
          where b.evaluation_id = ${evaluationId} ${matches} ${query.status ? sql`and ${status} = ${query.status}` : sql``}
          order by d.drv_path, b.id limit ${query.per_page} offset ${offset}`,
      ]);
      // A refused check answers first; the reads' own failure, if any, only after it.
      reads.catch(() => undefined);
      await allowed;
      const [byStatus, rows] = await reads;
      const counts = Object.fromEntries([...buildStatuses.map((s) => [s, 0]), ['total', 0]]) as BuildsPageView['counts'];
      for (const { status, n } of byStatus) {
        counts[status] = Number(n);
        counts.total += Number(n);
      }
      const total = query.status ? counts[query.status] : counts.total;
      return { builds: rows.map(toView), page: query.page, per_page: query.per_page, total, counts };
    },

    async log(who: Principal, id: string): Promise<Buffer> {
      const found = await build(who, id);
      return readBuildLog(sql, found.derivation_build);
    },

    /**
     * `nix log` against a cache (GET /cache/{cache}/log/{drv}): the stored log of a derivation kiln
     * built, or null so the upstreams are asked next. A path named like an output proves nothing (any
     * tenant may upload one to a cache of their own), so the cache must hold an output with the very
     * NarHash of a copy in a cache that a project whose evaluation reached the derivation writes to
     * (read-write or write-only subscription of the project or its organization): whoever may read
     * the cache may read the outputs the log describes. Failing that, a caller who may see one of
     * those evaluations gets the log too.
     */
    async logInCache(who: Principal, cacheId: string, drvBaseName: string): Promise<Buffer | null> {
      if (!DRV_BASE_NAME.test(drvBaseName)) return null;
      const [found] = await sql<{ id: string; vouched: boolean }[]>`
        select db.id, exists (
            select 1 from jsonb_each_text(d.outputs) o
            join path_signatures ps on ps.cache_id = ${cacheId} and ps.hash_part = substr(o.value, ${DEFAULT_STORE_DIR.length + 2}, 32)
            join cached_paths cp on cp.id = ps.cached_path_id and cp.store_path = o.value
            where exists (
              select 1 from builds b join evaluations e on e.id = b.evaluation_id
              join tasks t on t.id = e.task_id join projects p on p.id = t.project_id
              join subscriptions s on (s.project_id = p.id or s.organization_id = p.organization_id) and s.mode in (0, 2)
              join path_signatures theirs on theirs.cache_id = s.cache_id and theirs.hash_part = ps.hash_part
              join cached_paths copy on copy.id = theirs.cached_path_id and copy.store_path = cp.store_path and copy.nar_hash = cp.nar_hash
              where b.derivation_build_id = db.id)) as vouched
        from derivations d join derivation_builds db on db.derivation_id = d.id
        where d.drv_path = ${`${DEFAULT_STORE_DIR}/${drvBaseName}`}`;
      if (!found || !(found.vouched || await seesBuildOf(who, found.id))) return null;
      const log = await readBuildLog(sql, found.id);
      return log.length > 0 ? log : null;
    },

    /** The builds of the same evaluation that this one's derivation takes as inputs. */
    async dependencies(who: Principal, id: string): Promise<BuildView[]> {
      const found = await build(who, id);
      return (await sql<BuildRow[]>`
        select ${columns(sql, organizationOf(sql, found.evaluation_id))} from ${joins(sql)}
        where b.evaluation_id = ${found.evaluation_id}
          and d.id in (select x.depends_on from derivation_edges x join derivations me on me.id = x.derivation_id where me.drv_path = ${found.drv_path})
        order by d.drv_path`).map(toView);
    },

    async projectEntryPoints(who: Principal, org: string, project: string): Promise<EntryPointView[]> {
      const { row } = await demandProject(sql, who, org, project, 'viewProject');
      const [task] = await sql<{ id: string }[]>`select id from tasks where project_id = ${row.id} and name = 'default'`;
      const evaluation = task ? await latestEvaluation(task.id) : undefined;
      return evaluation ? entryPoints(evaluation) : [];
    },

    async taskEntryPoints(who: Principal, project: string, task: string, evaluationId: string | null): Promise<EntryPointView[]> {
      const { row } = await demandProjectRef(sql, who, project, 'viewProject');
      const id = await taskId(row.id, task);
      if (evaluationId) {
        const [owned] = await sql`select 1 from evaluations where id = ${evaluationId} and task_id = ${id}`;
        if (!owned) throw new ApiError('not_found', `no evaluation ${evaluationId} of task "${task}"`);
        return entryPoints(evaluationId);
      }
      const latest = await latestEvaluation(id);
      return latest ? entryPoints(latest) : [];
    },

    /** GET /tasks/{project}/{task}/evaluations?commit&attr: the newest evaluation at the commit that resolved the attribute. */
    async attributeAtCommit(who: Principal, project: string, task: string, commit: string, attr: string): Promise<EntryPointView & { commit: string }> {
      const { row } = await demandProjectRef(sql, who, project, 'viewProject');
      const id = await taskId(row.id, task);
      const [found] = await sql<BuildRow[]>`
        select ${columns(sql, sql`${row.organization_id}::uuid`)} from ${joins(sql)} join evaluations e on e.id = b.evaluation_id
        where e.task_id = ${id} and e.commit = ${commit} and b.entry_point and b.attr = ${attr}
        order by e.created_at desc limit 1`;
      if (!found) throw new ApiError('not_found', `no evaluation of task "${task}" at ${commit} resolved the attribute ${attr}`);
      return { ...toEntryPoint(toView(found)), commit };
    },
  };
}
export type BuildViewsService = ReturnType<typeof buildViewsService>;
