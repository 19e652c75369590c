// Direct builds (docs/builds.md, "Direct builds"): a derivation closure submitted over REST is
// signed into the project's writable caches (so any worker can fetch the .drv from a substituter)
// and recorded as an evaluation of kind 'direct' in the project's task "direct", in phase
// building: the scheduler then dispatches its builds like any evaluation's.
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Sql, TransactionSql } from 'postgres';
import { ApiError, sha256Nix32, type DerivationNode, type ExportedPath, type Narinfo } from '../../protocol/index.js';
import type { Emit, Events } from '../../storage/index.js';
import { userIdOf } from '../access/index.js';
import type { BuildView, BuildViewsService } from './buildViews.js';
import { changeBuildStatus } from './buildStatus.js';
import { lockScopedBuilds } from './tenantScope.js';
import { claimForEvaluation } from './tenantClaims.js';
import { readDirectClosure } from './directBuildClosure.js';
import { changePhase } from './evaluationPhases.js';
import type { Principal } from '../access/index.js';
import { projectCaches, writable, type ProjectCache } from '../caches/index.js';
import { finishedEvaluations, queuedDependents } from './schedulerQueries.js';
import { demandProjectPath } from '../projects/index.js';
import type { IngestTarget, NarIngest } from '../caches/index.js';
import type { SchedulerPort } from './schedulerPort.js';
import { insertDerivationBuilds } from './readiness.js';
import { numberRecorded } from './derivationNumbers.js';
import { mayRunAgain } from './graphRecorder.js';


/** The task that holds a project's direct builds; created on first use, like "default". */
export const DIRECT_TASK = 'direct';

export interface DirectBuildRequest {
  /** `org/project`, or a project UUID or unique name */
  project: string;
  /** one writable cache of the project; null: all of them */
  cache: string | null;
  /** the .drv to build; null: the closure's only root */
  drv: string | null;
  /** `nix-store --export` of the .drv's closure */
  closure: Buffer;
}

export interface DirectBuildsDeps {
  sql: Sql;
  events: Events;
  /** admission, the room check, signing and the events of each path the closure adds to a cache */
  ingest: NarIngest;
  views: Pick<BuildViewsService, 'build'>;
  /** the scheduler: there are builds to dispatch */
  scheduler: Pick<SchedulerPort, 'wake'>;
  /** eval.maxKeep: prune the task's old evaluations */
  prune?(taskId: string): Promise<void>;
}

function narinfoOf(p: ExportedPath): Narinfo {
  const base = (path: string) => path.slice(path.lastIndexOf('/') + 1);
  return {
    storePath: p.path, url: '', compression: 'none', narSize: p.nar.length,
    narHash: sha256Nix32(createHash('sha256').update(p.nar).digest()),
    references: p.references.map(base).sort(), sigs: [],
    ...(p.deriver ? { deriver: base(p.deriver) } : {}),
  };
}

/** Derivations, edges, the shared derivation_builds and this evaluation's builds, in `tx`. */
async function recordGraph(tx: TransactionSql, emit: Emit, evaluationId: string, nodes: readonly DerivationNode[], root: string): Promise<string> {
  // what this transaction inserted, and the derivations recorded before that gained edges: their graph rows are written last
  const inserted = new Set<string>();
  const gained = new Set<string>();
  for (const node of nodes) {
    const [row] = await tx<{ id: string }[]>`
      insert into derivations (drv_path, name, system, required_features, outputs, input_srcs, timeout_secs, max_silent_secs, prefer_local_build, fixed_output)
      values (${node.drvPath}, ${node.name}, ${node.system}, ${node.requiredSystemFeatures}, ${tx.json(node.outputs)}, ${node.inputSrcs},
              ${node.timeoutSecs}, ${node.maxSilentSecs}, ${node.preferLocalBuild}, ${node.fixedOutput})
      on conflict (drv_path) do nothing returning id`;
    if (row) inserted.add(row.id);
    const inputs = Object.keys(node.inputDrvs);
    if (inputs.length > 0) {
      const added = await tx<{ derivation_id: string }[]>`
        insert into derivation_edges (derivation_id, depends_on, outputs)
        select d.id, i.id, '{}' from derivations d, derivations i where d.drv_path = ${node.drvPath} and i.drv_path = any(${inputs})
        on conflict do nothing returning derivation_id`;
      if (added.length > 0 && !row) gained.add(added[0]!.derivation_id);
    }
  }
  const paths = nodes.map((n) => n.drvPath);
  const derivations = await tx<{ id: string }[]>`select id from derivations where drv_path = any(${paths})`;
  const ids = derivations.map((d) => d.id);
  // Another organization's build server's outcome is not this project's (tenantScope.ts), as when an evaluation starts building.
  await lockScopedBuilds(tx, { derivationIds: ids });
  await insertDerivationBuilds(tx, ids);
  await tx`
    insert into builds (evaluation_id, derivation_build_id, entry_point)
    select ${evaluationId}, b.id, d.drv_path = ${root} from derivation_builds b join derivations d on d.id = b.derivation_id
    where d.drv_path = any(${paths}) on conflict do nothing`;
  await claimForEvaluation(tx, emit, evaluationId, true);
  // the graph rows after every build lock (derivationNumbers.ts)
  await numberRecorded(tx, ids, inserted, gained);
  const [entry] = await tx<{ id: string }[]>`select id from builds where evaluation_id = ${evaluationId} and entry_point`;
  return entry!.id;
}

/** Times a direct build's transaction runs when PostgreSQL rolled it back for a deadlock or a serialization failure. */
const RECORD_ATTEMPTS = 3;

async function retried<T>(run: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (error) {
      if (!mayRunAgain(error)) throw error;
      if (attempt >= RECORD_ATTEMPTS) {
        throw new ApiError('direct_build_busy', 'the build graph was busy (a deadlock or serialization failure, three times); nothing was recorded, try again', { headers: { 'Retry-After': '1' } });
      }
      // Not at once into the same lock holders: a jittered pause lets the other side finish (review r7a).
      await sleep(20 + Math.random() * 80);
    }
  }
}

export function directBuildsService(deps: DirectBuildsDeps) {
  const { sql } = deps;

  /** Signs every path of the closure into each target cache that does not hold it yet. */
  async function ingest(who: Principal, paths: readonly ExportedPath[], caches: readonly ProjectCache[]): Promise<void> {
    const uploader = who.kind === 'user' ? { uploader: who.username, owner: who.userId } : {};
    const targets: IngestTarget[] = caches.map((c) => ({ id: c.id, name: c.name, ...uploader }));
    for (const p of paths) {
      const info = narinfoOf(p);
      for (const target of targets) await deps.ingest.put(target, info, p.nar, 'wait');
    }
  }

  /** Inputs that failed before fail the queued builds above them; an evaluation with nothing open completes. */
  async function settle(evaluationId: string): Promise<void> {
    const failed = await sql<{ id: string }[]>`
      select db.id from builds b join derivation_builds db on db.id = b.derivation_build_id
      where b.evaluation_id = ${evaluationId} and db.status = 'failed'`;
    for (const { id } of failed) {
      for (const dependent of await queuedDependents(sql, id)) {
        await changeBuildStatus(deps.events, dependent.id, {
          event: { type: 'fail', class: 'FailedPermanent', reason: 'dependency_failed' },
          failure: { class: 'FailedPermanent', reason: 'dependency_failed', message: `an input of this derivation failed (derivation_build ${id})` },
        });
      }
    }
    for (const { id } of await finishedEvaluations(sql, { evaluation: evaluationId })) {
      await changePhase(deps.events, id, { event: { type: 'complete' } });
    }
  }

  return {
    async submit(who: Principal, request: DirectBuildRequest): Promise<BuildView> {
      const userId = userIdOf(who);
      const project = await demandProjectPath(sql, who, request.project, 'triggerEvaluation');
      const label = `${project.organization}/${project.name}`;
      if (!project.active) throw new ApiError('project_inactive', `project "${label}" is disabled; enable it with POST /projects/${label}/active`);
      const closure = readDirectClosure(request.closure, request.drv);

      const writableCaches = writable(await projectCaches(sql, project.id));
      if (writableCaches.length === 0) {
        throw new ApiError('no_writable_cache', `project "${label}" writes into no cache, so no worker could fetch the derivation; subscribe it to a cache with mode 0 or 2 first`);
      }
      const targets = request.cache === null ? writableCaches : writableCaches.filter((c) => c.name.toLowerCase() === request.cache!.toLowerCase());
      if (targets.length === 0) {
        throw new ApiError('cache_not_writable', `project "${label}" does not write into a cache "${request.cache}"; its writable caches: ${writableCaches.map((c) => c.name).join(', ')}`);
      }
      await ingest(who, closure.paths, targets);

      // A completion or a recording may hold the builds' locks in another order: a deadlock or a
      // serialization failure rolls the whole transaction back, and it runs again (the closure is in the caches already).
      const record = () => deps.events.transaction(async (tx, emit) => {
        await tx`insert into tasks (project_id, name) values (${project.id}, ${DIRECT_TASK}) on conflict (project_id, name) do nothing`;
        const [task] = await tx<{ id: string }[]>`select id from tasks where project_id = ${project.id} and name = ${DIRECT_TASK}`;
        const [evaluation] = await tx<{ id: string }[]>`
          insert into evaluations (task_id, kind, repository, commit, wildcard, phase, created_by, started_at)
          values (${task!.id}, 'direct', '', null, ${closure.root}, 'building', ${userId}, now()) returning id`;
        const id = evaluation!.id;
        const buildId = await recordGraph(tx, emit, id, closure.derivations, closure.root);
        const scope = { projectId: project.id, organizationId: project.organization_id, taskId: task!.id, evaluationId: id };
        emit('evaluation.building', { evaluation_id: id, project: label, task: DIRECT_TASK, phase: 'building', attr: closure.root }, scope);
        const [root] = await tx<{ derivation_build: string; status: string }[]>`
          select db.id as derivation_build, db.status from builds b join derivation_builds db on db.id = b.derivation_build_id where b.id = ${buildId}`;
        if (root!.status === 'queued') {
          emit('build.queued', {
            build_id: buildId, derivation_build: root!.derivation_build, evaluation_id: id, status: 'queued',
            task: DIRECT_TASK, project: label, entry_point: true, drv_path: closure.root,
          }, { ...scope, buildId });
        }
        return { evaluationId: id, taskId: task!.id, buildId };
      });
      const { evaluationId, taskId, buildId } = await retried(record);
      await settle(evaluationId);
      deps.scheduler.wake();
      await deps.prune?.(taskId);
      return deps.views.build(who, buildId);
    },

    /** The caller's direct builds, newest first; those whose project the caller can no longer see are left out. */
    async recent(who: Principal, limit: number): Promise<BuildView[]> {
      const userId = userIdOf(who);
      const rows = await sql<{ id: string }[]>`
        select b.id from evaluations e join builds b on b.evaluation_id = e.id and b.entry_point
        where e.kind = 'direct' and e.created_by = ${userId} order by e.created_at desc limit ${limit}`;
      const views: BuildView[] = [];
      for (const row of rows) {
        try {
          views.push(await deps.views.build(who, row.id));
        } catch (e) {
          if (!(e instanceof ApiError && e.status === 404)) throw e;
        }
      }
      return views;
    },
  };
}
export type DirectBuildsService = ReturnType<typeof directBuildsService>;
