// Every status change of a shared derivation_build goes through here: the row, and build.<status>
// for each evaluation's build that points at it, in one transaction (durable for entry points
// only: the catalog's rule, DESIGN.md "Durability").
import type { TransactionSql } from 'postgres';
import type { Emit, Events } from '../../storage/index.js';
import type { BuildStatus, FailureClass } from '../../protocol/index.js';
import type { Queryable } from '../../storage/index.js';
import { buildMove, type BuildContext, type BuildEvent } from '../../actors/index.js';
import type { ReadiedBuild } from './readyBuild.js';
import { DONE } from './readiness.js';
import { doneForUpdate, failedForUpdate, offeredTo, wantedByOtherTenants, workerScopeUpdate } from './tenantScope.js';
import { failureFor, failureStandsFor, keepScopedFailure, statusFor } from './organizationStatus.js';

export interface StatusChange {
  /** what happened: the lifecycle (actors/lifecycles.ts) says which statuses it moves the build from and to */
  event: BuildEvent;
  /** what the lifecycle's guards look at when the event is a failure (attempts and loops left) */
  context?: Partial<BuildContext>;
  workerId?: string | null;
  /**
   * a dispatch's: the projects the worker serves, whose organizations alone its outcome stands for
   * (tenantScope.ts); null or absent: an open-mode worker (kiln's own), trusted by every tenant
   */
  workerProjects?: readonly string[] | null;
  /** a dependency failure's: the organizations its input's failure stands for (failed_for) */
  failedFor?: readonly string[];
  /**
   * a transient failure's: the organizations that have spent build.maxAttempts with it, though the
   * worker's have not (attemptScopes.ts): the failure stands for them too (added to failed_for)
   */
  exhaustedFor?: readonly string[];
  failure?: { class: FailureClass; reason: string; message: string };
  /** a worker's report's: the change applies only while the row is still at this attempt (a stale report changes nothing) */
  attempt?: number;
  /** a re-queue after a worker declined the dispatch: counted in declines, no attempt spent (docs/builds.md, "Declined builds") */
  declined?: boolean;
  /** a transient failure's retry waits until then (and so does the re-queue for other organizations of one that failed for some) */
  notBefore?: Date | null;
  logBytes?: number;
  logDroppedBytes?: number;
  /** also emit for this evaluation's build, though the evaluation is final (the one just aborted) */
  evaluationId?: string;
  /** receives the queued builds of building evaluations whose last open input this change closed (the scheduler's ready queue) */
  readied?: (builds: ReadiedBuild[]) => void;
}


/** A status change's move of its dependents' readiness counters, applied with the others of its transaction. */
interface ReadinessMove {
  derivationBuildId: string;
  delta: number;
  readied?: (builds: ReadiedBuild[]) => void;
}

/**
 * The readiness counter (migration 0042): each change into or out of {completed, substituted}
 * moves inputs_remaining of every build that takes it as an input, in the caller's transaction.
 * One statement for all of a transaction's changes, after locking the dependents in id order:
 * two batches of completions sharing dependents then wait for each other instead of deadlocking.
 * Returns the telling of the builds it made ready, for the caller to run once the transaction has
 * committed: told earlier, a scheduler pass could read them before the commit, find them not ready
 * yet and forget them until its next full read.
 */
async function moveReadiness(tx: TransactionSql, moves: readonly ReadinessMove[]): Promise<() => void> {
  if (moves.length === 0) return () => undefined;
  const ids = moves.map((m) => m.derivationBuildId);
  const deltas = moves.map((m) => m.delta);
  // One statement: the dependents locked in id order (materialized, so the lock comes first), then
  // moved; those it made ready come back with what the scheduler places them by, so its ready queue
  // takes them without reading them again (one round trip fewer between a completion and the next
  // dispatch, issue 23). Only builds of building evaluations come back, with the projects that want
  // them, as readyBuilds reads them (schedulerQueries.ts).
  const ready = await tx<ReadiedBuild[]>`
    with m as (
      select x.derivation_id, sum(c.delta)::int as delta
      from unnest(${ids}::uuid[], ${deltas}::int[]) as c(id, delta)
      join derivation_builds b on b.id = c.id join derivation_edges x on x.depends_on = b.derivation_id
      group by x.derivation_id),
    locked as materialized (select dep.id from derivation_builds dep where dep.derivation_id in (select derivation_id from m) order by dep.id for no key update),
    moved as (
      update derivation_builds dep set inputs_remaining = dep.inputs_remaining + m.delta, ready = dep.inputs_remaining + m.delta = 0
      from m, locked l where l.id = dep.id and dep.derivation_id = m.derivation_id and m.delta <> 0
      returning dep.id, dep.derivation_id, dep.status, dep.inputs_remaining, dep.attempts, dep.substitute_misses, dep.queued_at, dep.not_before, dep.done_for, dep.failed_for)
    select db.id, d.drv_path, d.name, d.system, d.required_features, d.outputs, d.timeout_secs, d.max_silent_secs, db.attempts,
           d.prefer_local_build, db.substitute_misses,
           array_agg(distinct p.id) as projects, db.queued_at, db.not_before,
           array_agg(distinct coalesce(t.build_timeout_secs, -1)) as task_timeouts,
           array_agg(distinct coalesce(t.build_max_silent_secs, -1)) as task_max_silents
    from moved db join derivations d on d.id = db.derivation_id
    join builds b on b.derivation_build_id = db.id
    join evaluations e on e.id = b.evaluation_id and e.phase = 'building'
    join tasks t on t.id = e.task_id join projects p on p.id = t.project_id and ${offeredTo(tx)}
    where db.inputs_remaining = 0 and db.status = 'queued'
    group by db.id, db.attempts, db.substitute_misses, db.queued_at, db.not_before, d.id`;
  const tell = new Set(moves.flatMap((m) => (m.readied ? [m.readied] : [])));
  return () => {
    if (ready.length > 0) for (const readied of tell) readied(ready);
  };
}

/** Whether a change from `from` to `to` moves the dependents' counters, and which way. */
function readinessDelta(from: BuildStatus, to: BuildStatus): number {
  if (DONE.has(from) === DONE.has(to)) return 0;
  return DONE.has(to) ? -1 : 1;
}

/** PostgreSQL's deadlock_detected: the transaction rolled back and may simply run again. */
const isDeadlock = (error: unknown) => typeof error === 'object' && error !== null && (error as { code?: unknown }).code === '40P01';

/** A per-evaluation build that points at a derivation_build: what its events name and their scope. */
export interface BuildRow {
  build_id: string;
  evaluation_id: string;
  entry_point: boolean;
  attr: string | null;
  project: string;
  project_id: string;
  organization_id: string;
  task: string;
  task_id: string;
  drv_path: string;
  /** the derivation_build's status and failure class as the evaluation's organization sees them (organizationStatus.ts) */
  seen_status: BuildStatus;
  seen_failure: FailureClass | null;
  /** whether the record's failure stands for the evaluation's organization (failed_for null or naming it) */
  failure_stands: boolean;
}

/** A BuildRow's columns, over builds b, tasks t, projects p, organizations o, derivations d and derivation_builds db. */
const buildRowColumns = (sql: Queryable) => sql`
  b.id as build_id, b.evaluation_id, b.entry_point, b.attr, o.name || '/' || p.name as project, p.id as project_id,
  p.organization_id, t.name as task, t.id as task_id, d.drv_path,
  ${statusFor(sql, sql`p.organization_id`)} as seen_status, ${failureFor(sql, sql`p.organization_id`, 'class')} as seen_failure,
  ${failureStandsFor(sql, sql`p.organization_id`)} as failure_stands`;

/** The builds of running evaluations (and of `alsoEvaluation`) that share this derivation_build. */
export function buildsOfDerivationBuild(sql: Queryable, derivationBuildId: string, alsoEvaluation: string | null = null): Promise<BuildRow[]> {
  return buildsOfDerivationBuilds(sql, [derivationBuildId], alsoEvaluation);
}

/** The builds of running evaluations (and of `alsoEvaluation`) that share these derivation_builds, with the one each points at. */
function buildsOfDerivationBuilds(sql: Queryable, derivationBuildIds: readonly string[], alsoEvaluation: string | null = null): Promise<(BuildRow & { derivation_build_id: string })[]> {
  if (derivationBuildIds.length === 0) return Promise.resolve([]);
  return sql<(BuildRow & { derivation_build_id: string })[]>`
    select b.derivation_build_id, ${buildRowColumns(sql)}
    from builds b join evaluations e on e.id = b.evaluation_id join tasks t on t.id = e.task_id join projects p on p.id = t.project_id
    join organizations o on o.id = p.organization_id join derivation_builds db on db.id = b.derivation_build_id
    join derivations d on d.id = db.derivation_id
    where b.derivation_build_id = any(${derivationBuildIds as string[]}::uuid[]) and (e.phase not in ('completed', 'failed', 'aborted') or e.id = ${alsoEvaluation}::uuid)
    order by b.id`;
}

/** Applies the change when the build is in a status its event leaves; the new attempt number, or null when it did not apply. */
export async function changeBuildStatus(events: Events, derivationBuildId: string, change: StatusChange): Promise<number | null> {
  const [attempt] = await changeBuildStatuses(events, [{ id: derivationBuildId, change }]);
  return attempt ?? null;
}

/**
 * Several changes in one transaction (the scheduler's batches: one commit instead of one per
 * build); for each, the new attempt number or null when it did not apply.
 */
export async function changeBuildStatuses(
  events: Events, changes: readonly { id: string; change: StatusChange }[],
  /** written in the same transaction, last: what the changes must not be seen without (build samples) */
  beforeCommit?: (tx: TransactionSql) => Promise<unknown>,
): Promise<(number | null)[]> {
  if (changes.length === 0) return [];
  for (let attempt = 1; ; attempt++) {
    try {
      const { results, tellReadied } = await events.transaction(async (tx, emit) => {
        const moves: ReadinessMove[] = [];
        const results = changes.length > 1 && sameSimpleEvent(changes)
          ? await applyStatusChangesAtOnce(tx, emit, changes, moves)
          : await sequentially(changes, (c) => applyStatusChange(tx, emit, c.id, c.change, moves));
        const tellReadied = await moveReadiness(tx, moves);
        await beforeCommit?.(tx);
        return { results, tellReadied };
      }, { pipelined: true, genericPlans: true }); // `begin` with the first statement: one round trip fewer on the dispatch path; plans: docs/builds.md
      // committed: the builds it made ready are visible to whoever is told of them
      tellReadied();
      return results;
    } catch (error) {
      // Another process's batch locked the same rows in another order: nothing was written, try again.
      if (!isDeadlock(error) || attempt >= 3) throw error;
    }
  }
}

/**
 * One change decided under the row's lock, in one transaction with what `decide` reads and writes
 * first (a failure: the attempts spent and their record), so a report handled at the same time
 * cannot decide on the same count; null when `decide` gives none or the change did not apply.
 */
export async function changeBuildStatusLocked(events: Events, derivationBuildId: string, decide: (tx: TransactionSql) => Promise<StatusChange | null>): Promise<number | null> {
  const { result, tellReadied } = await events.transaction(async (tx, emit) => {
    await tx`select 1 from derivation_builds where id = ${derivationBuildId} for no key update`;
    const change = await decide(tx);
    if (change === null) return { result: null, tellReadied: () => undefined };
    const moves: ReadinessMove[] = [];
    const result = await applyStatusChange(tx, emit, derivationBuildId, change, moves);
    return { result, tellReadied: await moveReadiness(tx, moves) };
  });
  tellReadied();
  return result;
}

async function sequentially<T, R>(items: readonly T[], fn: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = [];
  for (const item of items) results.push(await fn(item));
  return results;
}

/**
 * The scheduler's big batches (dispatch, completion, substitution): one event for every build,
 * with nothing but a worker and log sizes that differ (a worker for all or none), and no evaluation
 * to name besides the open ones.
 */
function sameSimpleEvent(changes: readonly { change: StatusChange }[]): boolean {
  const type = changes[0]!.change.event.type;
  return (type === 'dispatch' || type === 'succeed' || type === 'substitute')
    && changes.every(({ change }) => change.event.type === type && change.context === undefined && change.failure === undefined && change.failedFor === undefined
      && change.notBefore === undefined && change.evaluationId === undefined
      && (change.workerId !== undefined) === (changes[0]!.change.workerId !== undefined));
}

/**
 * applyStatusChange for a batch of the same simple event in one statement instead of two per build:
 * the rows locked in id order with their old status (two batches sharing rows wait for each other
 * instead of deadlocking), the guarded update (a row another process moved meanwhile is re-checked
 * against the guard and left alone: one process wins a job), and the evaluations' builds of what it
 * changed, for their events; then the same events, build by build, as one change at a time emits them.
 * Row locks here are `for no key update`: they serialize status changes as `for update` did, but let
 * a build sample's foreign key check through, which a completion waits for before it commits.
 */
async function applyStatusChangesAtOnce(tx: TransactionSql, emit: Emit, changes: readonly { id: string; change: StatusChange }[], moves: ReadinessMove[]): Promise<(number | null)[]> {
  const event = changes[0]!.change.event;
  const { from, to } = buildMove(event);
  const final = to === 'completed' || to === 'failed' || to === 'substituted' || to === 'aborted';
  const ids = changes.map((c) => c.id);
  const setsWorker = changes[0]!.change.workerId !== undefined;
  const workers = changes.map((c) => c.change.workerId ?? null);
  const logBytes = changes.map((c) => c.change.logBytes ?? null);
  const logDropped = changes.map((c) => c.change.logDroppedBytes ?? null);
  // uuid[] literals, one a change (unnest would flatten an array of arrays); null: an open worker
  const workerProjects = changes.map((c) => (c.change.workerProjects ? `{${c.change.workerProjects.join(',')}}` : null));
  const rows = await tx<({ id: string; attempts: number; previous: BuildStatus; scoped: boolean } & Partial<BuildRow>)[]>`
    with locked as materialized (
      select d.id, d.status as previous, c.worker_id, c.log_bytes, c.log_dropped_bytes, c.worker_projects
      from unnest(${ids}::uuid[], ${workers}::uuid[], ${logBytes}::bigint[], ${logDropped}::bigint[], ${workerProjects}::text[])
        as c(id, worker_id, log_bytes, log_dropped_bytes, worker_projects)
      join derivation_builds d on d.id = c.id
      order by d.id for no key update of d),
    changed as (
      update derivation_builds b set status = ${to}, updated_at = now(),
        attempts = b.attempts + ${event.type === 'dispatch' ? 1 : 0},
        worker_id = case when ${setsWorker} then locked.worker_id else b.worker_id end,
        failure_class = null, failure_reason = null, failure_message = null, not_before = null,
        started_at = case when ${to === 'started'} then now() else b.started_at end,
        finished_at = case when ${final} then now() when ${to === 'queued'} then null else b.finished_at end,
        log_bytes = coalesce(locked.log_bytes, b.log_bytes), log_dropped_bytes = coalesce(locked.log_dropped_bytes, b.log_dropped_bytes),
        done_for = ${doneForUpdate(tx, event)}, failed_for = ${failedForUpdate(tx, event, to)},
        worker_scope = ${workerScopeUpdate(tx, event, tx`locked.worker_projects::uuid[]`)}
      from locked
      where b.id = locked.id and b.status = any(${from as string[]})
      returning b.id, b.attempts, locked.previous, b.derivation_id, b.done_for is not null as scoped, b.status, b.done_for, b.failed_for, b.failure_class)
    select db.id, db.attempts, db.previous, db.scoped, ${buildRowColumns(tx)}
    from changed db join derivations d on d.id = db.derivation_id
    left join (builds b join evaluations e on e.id = b.evaluation_id and e.phase not in ('completed', 'failed', 'aborted')
      join tasks t on t.id = e.task_id join projects p on p.id = t.project_id join organizations o on o.id = p.organization_id)
      on b.derivation_build_id = db.id
    order by b.id`;
  const byId = new Map<string, { attempts: number; previous: BuildStatus; scoped: boolean }>();
  const buildsOf = new Map<string, BuildRow[]>();
  for (const row of rows) {
    byId.set(row.id, row);
    if (row.build_id !== null && row.build_id !== undefined) buildsOf.set(row.id, [...(buildsOf.get(row.id) ?? []), row as BuildRow]);
  }
  const results = changes.map(({ id, change }) => {
    const row = byId.get(id);
    if (!row) return null;
    const delta = readinessDelta(row.previous, to);
    if (delta !== 0) moves.push({ derivationBuildId: id, delta, ...(change.readied ? { readied: change.readied } : {}) });
    emitBuildEvents(emit, id, buildsOf.get(id) ?? [], to, row, change);
    return row.attempts;
  });
  if (event.type === 'succeed') await requeueForOtherTenants(tx, emit, [...byId].filter(([, row]) => row.scoped).map(([id]) => id), moves);
  return results;
}

/**
 * Completions (or final failures) on a worker only some organizations trust that a building
 * evaluation of another organization also wants go back to the queue for it in the same
 * transaction (tenantScope.ts): their readiness moves cancel out.
 */
async function requeueForOtherTenants(tx: TransactionSql, emit: Emit, completedOnServers: readonly string[], moves: ReadinessMove[], notBefore: Date | null = null): Promise<void> {
  for (const id of await wantedByOtherTenants(tx, completedOnServers)) {
    await applyStatusChange(tx, emit, id, { event: { type: 'requeue', why: 'other_tenant' }, notBefore }, moves);
  }
}

/**
 * The same change for several builds inside the caller's transaction (the re-queues of lost jobs
 * and of builds an evaluation reaches again), each with its events; the ids it applied to.
 */
export async function applyStatusChanges(tx: TransactionSql, emit: Emit, derivationBuildIds: readonly string[], change: StatusChange): Promise<string[]> {
  const applied: string[] = [];
  const moves: ReadinessMove[] = [];
  for (const id of derivationBuildIds) if ((await applyStatusChange(tx, emit, id, change, moves)) !== null) applied.push(id);
  // Inside the caller's transaction, whose commit this cannot wait for: these callers pass no `readied`.
  (await moveReadiness(tx, moves))();
  return applied;
}

/**
 * One change and its build events inside the caller's transaction (the caller checked more than
 * the status under a lock). The readiness counters move at once, or with the others of a batch
 * when it passes `moves`.
 */
export async function applyStatusChange(tx: TransactionSql, emit: Emit, derivationBuildId: string, change: StatusChange, moves?: ReadinessMove[]): Promise<number | null> {
  const { from, to } = buildMove(change.event, change.context);
  const final = to === 'completed' || to === 'failed' || to === 'substituted' || to === 'aborted';
  // a failure queued again for another tenant, and restored, keeps what it said
  const keepsFailure = change.event.type === 'restore' || (change.event.type === 'requeue' && change.event.why === 'other_tenant');
  const projects = change.workerProjects ? `{${change.workerProjects.join(',')}}` : null;
  const [updated] = await tx<{ attempts: number; previous: BuildStatus; scoped: boolean; failed_scoped: boolean; worker_scope: string[] | null }[]>`
    update derivation_builds b set status = ${to}, updated_at = now(),
      attempts = attempts + ${change.event.type === 'dispatch' ? 1 : 0},
      declines = declines + ${change.declined === true && change.event.type === 'requeue' ? 1 : 0},
      worker_id = case when ${change.workerId !== undefined} then ${change.workerId ?? null}::uuid else worker_id end,
      failure_class = case when ${keepsFailure} then failure_class else ${change.failure?.class ?? null} end,
      failure_reason = case when ${keepsFailure} then failure_reason else ${change.failure?.reason ?? null} end,
      failure_message = case when ${keepsFailure} then failure_message else ${change.failure?.message.slice(0, 20000) ?? null} end,
      not_before = ${change.notBefore ?? null},
      started_at = case when ${to === 'started'} then now() else started_at end,
      finished_at = case when ${final} then now() when ${to === 'queued'} then null else finished_at end,
      log_bytes = coalesce(${change.logBytes ?? null}, log_bytes), log_dropped_bytes = coalesce(${change.logDroppedBytes ?? null}, log_dropped_bytes),
      done_for = ${doneForUpdate(tx, change.event)},
      failed_for = ${change.failedFor ? tx`${change.failedFor as string[]}::uuid[]`
        : change.exhaustedFor ? tx`kiln_completion_scope(b.failed_for, ${change.exhaustedFor as string[]}::uuid[])` : failedForUpdate(tx, change.event, to)},
      worker_scope = ${workerScopeUpdate(tx, change.event, tx`${projects}::uuid[]`)}
    from (select status as previous from derivation_builds where id = ${derivationBuildId} for no key update) old
    where b.id = ${derivationBuildId} and b.status = any(${from as string[]}) and (${change.attempt ?? null}::int is null or b.attempts = ${change.attempt ?? null}::int)
    returning b.attempts, old.previous, b.done_for is not null as scoped, b.failed_for is not null as failed_scoped, b.worker_scope`;
  if (!updated) return null;
  // A final failure that stands for some organizations only: kept for them (organizationStatus.ts),
  // for a later completion of another organization's server would clear it.
  if (change.event.type === 'fail' && to === 'failed' && updated.failed_scoped) {
    await keepScopedFailure(tx, derivationBuildId, change.failedFor ?? change.exhaustedFor ?? (updated.previous === 'started' ? updated.worker_scope : null));
  }
  const delta = readinessDelta(updated.previous, to);
  if (delta !== 0) {
    const move = { derivationBuildId, delta, ...(change.readied ? { readied: change.readied } : {}) };
    if (moves) moves.push(move);
    else (await moveReadiness(tx, [move]))(); // the caller's transaction, as applyStatusChanges
  }
  const builds = await buildsOfDerivationBuild(tx, derivationBuildId, change.evaluationId ?? null);
  emitBuildEvents(emit, derivationBuildId, builds, to, updated, change);
  // a scoped outcome another organization's building evaluation wants goes back to the queue for it
  if ((change.event.type === 'succeed' && updated.scoped) || (change.event.type === 'fail' && to === 'failed' && updated.failed_scoped)) {
    const own: ReadinessMove[] = [];
    await requeueForOtherTenants(tx, emit, [derivationBuildId], moves ?? own, change.event.type === 'fail' ? change.notBefore ?? null : null);
    (await moveReadiness(tx, own))();
  }
  return updated.attempts;
}

/** build.<status> and build.status_changed for each evaluation's build that points at the changed derivation_build. */
function emitBuildEvents(emit: Emit, derivationBuildId: string, builds: readonly BuildRow[], to: BuildStatus, updated: { attempts: number; previous: BuildStatus }, change: StatusChange): void {
  for (const build of builds) {
    // Each evaluation hears the build as its organization sees it (organizationStatus.ts): another
    // organization's completion of a build that failed for this one is `build.failed`, with its own
    // failure; another's failure of a build completed for this one is `build.completed`; and
    // another's failure (which goes back to the queue for it, or waits for it to queue it) nothing.
    if (to === 'failed' && build.seen_status !== 'completed' && !build.failure_stands) continue;
    const seenOther = (to === 'completed' || to === 'failed') && build.seen_status !== to;
    const status = seenOther ? build.seen_status : to;
    const failure = seenOther ? build.seen_failure : status === 'failed' ? build.seen_failure ?? change.failure?.class : change.failure?.class;
    const identity = {
      build_id: build.build_id, derivation_build: derivationBuildId, evaluation_id: build.evaluation_id, status,
      task: build.task, project: build.project,
    };
    const extra = { ...(failure ? { failure } : {}), ...(change.workerId ? { worker: change.workerId } : {}) };
    const scope = { projectId: build.project_id, organizationId: build.organization_id, taskId: build.task_id, evaluationId: build.evaluation_id, buildId: build.build_id };
    emit(`build.${status}`, {
      ...identity, entry_point: build.entry_point, drv_path: build.drv_path, attempt: updated.attempts,
      ...(build.attr ? { attr: build.attr } : {}), ...extra,
    }, scope);
    // Every transition, entry point or not, for the live paths (never durable).
    emit('build.status_changed', { ...identity, previous: updated.previous, entry_point: build.entry_point, ...extra }, scope);
  }
}
