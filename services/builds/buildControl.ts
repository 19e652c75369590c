// One build at a time (docs/builds.md, "Aborting or restarting one build"): `POST /builds/{id}`
// aborts a queued or running build, or restarts a failed or aborted one, while its evaluation is
// open. A derivation build is shared by every evaluation that reaches the derivation, so an abort
// that another open evaluation would feel is refused; a finished evaluation is history, and its
// failed builds are tried again by restarting the evaluation (POST /evals/{id} restart).
import type { Sql, TransactionSql } from 'postgres';
import { ApiError, type EvaluationPhase } from '../../protocol/index.js';
import type { Events } from '../../storage/index.js';
import type { Principal } from '../access/index.js';
import { applyStatusChange, applyStatusChanges } from './buildStatus.js';
import { freshAttempts } from './attemptScopes.js';
import { organizationOfEvaluation, statusFor } from './organizationStatus.js';
import { changePhase, FINAL_PHASES } from './evaluationPhases.js';
import type { EvaluationsService } from './evaluations.js';
import type { SchedulerPort } from './schedulerPort.js';
import { finishedEvaluations } from './schedulerQueries.js';

export type BuildAction = 'abort' | 'restart';

export interface BuildControlDeps {
  sql: Sql;
  events: Events;
  evaluations: Pick<EvaluationsService, 'visible'>;
  scheduler: Pick<SchedulerPort, 'wake'>;
}

interface Target {
  buildId: string;
  evaluationId: string;
  derivationBuildId: string;
}

/** Another open evaluation than `evaluationId` has a build of this derivation build. */
const wantedElsewhere = (tx: TransactionSql, evaluationId: string) => tx`
  exists (select 1 from builds other join evaluations e on e.id = other.evaluation_id
          where other.derivation_build_id = db.id and other.evaluation_id <> ${evaluationId} and e.phase <> all(${FINAL_PHASES as string[]}))`;

/** The evaluation's own builds that need this one, directly or not, with the given statuses. */
const dependentsIn = (tx: TransactionSql, target: Target, statuses: readonly string[]) => tx<{ id: string; status: string; failure_reason: string | null }[]>`
  with recursive dependents(derivation_id) as (
    select x.derivation_id from derivation_edges x join derivation_builds db on db.derivation_id = x.depends_on where db.id = ${target.derivationBuildId}
    union
    select x.derivation_id from derivation_edges x join dependents d on x.depends_on = d.derivation_id)
  select db.id, db.status, db.failure_reason from derivation_builds db
  join dependents d on d.derivation_id = db.derivation_id
  join builds b on b.derivation_build_id = db.id and b.evaluation_id = ${target.evaluationId}
  where db.status = any(${statuses as string[]})
  order by db.id`;

export function buildControlService(deps: BuildControlDeps) {
  const { sql, events } = deps;

  /** The build, seen with triggerEvaluation on its project, in an evaluation that is still open. */
  async function target(who: Principal, buildId: string): Promise<Target> {
    const [row] = await sql<{ evaluation_id: string; derivation_build_id: string }[]>`
      select evaluation_id, derivation_build_id from builds where id = ${buildId}`;
    if (!row) throw new ApiError('not_found', `no build ${buildId}`);
    // Someone who cannot see the project learns nothing more than for GET /builds/{id}.
    await deps.evaluations.visible(who, row.evaluation_id, 'triggerEvaluation').catch((e: unknown) => {
      if (e instanceof ApiError && e.status !== 404) throw e;
      throw new ApiError('not_found', `no build ${buildId}`);
    });
    return { buildId, evaluationId: row.evaluation_id, derivationBuildId: row.derivation_build_id };
  }

  /** Inside the transaction: the evaluation's phase, locked so it cannot finish meanwhile. */
  async function openEvaluation(tx: TransactionSql, target: Target): Promise<void> {
    const [evaluation] = await tx<{ phase: EvaluationPhase }[]>`select phase from evaluations where id = ${target.evaluationId} for update`;
    if (!evaluation || FINAL_PHASES.includes(evaluation.phase)) {
      throw new ApiError('evaluation_finished', `evaluation ${target.evaluationId} is ${evaluation?.phase ?? 'gone'}: its builds are history; restart the evaluation (POST /evals/${target.evaluationId} with {"method": "restart"}) to try its failed builds again`);
    }
  }

  async function abort(who: Principal, buildId: string): Promise<string> {
    const found = await target(who, buildId);
    await events.transaction(async (tx, emit) => {
      await openEvaluation(tx, found);
      // Locked first, asked about other evaluations after: a recording that reached the build holds
      // a key-share lock on it until it commits, and a statement sees only what was committed
      // when it began, so a check in the locking statement would miss that evaluation.
      const [row] = await tx<{ status: string }[]>`select status from derivation_builds where id = ${found.derivationBuildId} for update`;
      if (!row || (row.status !== 'queued' && row.status !== 'started')) {
        throw new ApiError('build_finished', `build ${buildId} is ${row?.status ?? 'gone'}; only a queued or running build can be aborted`);
      }
      const [{ shared }] = await tx<[{ shared: boolean }]>`
        select ${wantedElsewhere(tx, found.evaluationId)} as shared from derivation_builds db where db.id = ${found.derivationBuildId}`;
      if (shared) {
        throw new ApiError('build_shared', `build ${buildId} is also wanted by another open evaluation of the same derivation, which an abort would stop too; abort the evaluation instead, or wait for the build`);
      }
      const failure = { class: 'FailedTransient' as const, reason: 'cancelled', message: 'aborted by request' };
      await applyStatusChange(tx, emit, found.derivationBuildId, { event: { type: 'abort' }, evaluationId: found.evaluationId, failure });
      // Its queued dependents could never start: they end with it, aborted too (not failed, so a
      // later evaluation builds them), unless another open evaluation wants them.
      // Locked before they are asked about, as above.
      const dependents = await dependentsIn(tx, found, ['queued']);
      await tx`select 1 from derivation_builds where id = any(${dependents.map((d) => d.id)}::uuid[]) order by id for update`;
      const unshared = await tx<{ id: string }[]>`
        select db.id from derivation_builds db where db.id = any(${dependents.map((d) => d.id)}::uuid[]) and db.status = 'queued' and not ${wantedElsewhere(tx, found.evaluationId)}
        order by db.id`;
      const inputAborted = { ...failure, message: `an input of this derivation was aborted by request (build ${buildId})` };
      await applyStatusChanges(tx, emit, unshared.map((d) => d.id), { event: { type: 'abort' }, evaluationId: found.evaluationId, failure: inputAborted });
    });
    // The job on its worker is cancelled by the scheduler's next pass (jobCancellations.ts).
    await finish(found);
    deps.scheduler.wake();
    return 'Build aborted';
  }

  async function restart(who: Principal, buildId: string): Promise<string> {
    const found = await target(who, buildId);
    const requeued = await events.transaction(async (tx, emit) => {
      await openEvaluation(tx, found);
      // the status as the evaluation's organization sees it (organizationStatus.ts): a failure
      // that is another organization's, after this one's completion, is not this one's to restart
      const [row] = await tx<{ status: string; seen: string }[]>`
        select db.status, ${statusFor(tx, organizationOfEvaluation(tx, tx`${found.evaluationId}::uuid`))} as seen
        from derivation_builds db where db.id = ${found.derivationBuildId} for update`;
      if (!row || (row.seen !== 'failed' && row.seen !== 'aborted')) {
        throw new ApiError('build_not_failed', `build ${buildId} is ${row?.seen ?? 'gone'}; only a failed or aborted build can be restarted`);
      }
      if (row.seen !== row.status) {
        throw new ApiError('build_not_failed', `build ${buildId} failed for this organization, but another organization's completion of the same derivation stands; it cannot be restarted (docs/builds.md, "Whose failure")`);
      }
      // The dependents it took down come back with it: those that failed because an input failed
      // and those aborted with it. One that also waits on another failed input stays as it is, or
      // it would wait forever and its evaluation would never finish.
      const dependents = await dependentsIn(tx, found, ['failed', 'aborted']);
      const candidates = new Set([found.derivationBuildId, ...dependents.filter((d) => d.status === 'aborted' || d.failure_reason === 'dependency_failed').map((d) => d.id)]);
      const returning = await backTogether(tx, candidates);
      if (!returning.has(found.derivationBuildId)) {
        throw new ApiError('build_inputs_failed', `build ${buildId} failed because an input of it failed, and that input is not coming back with it; restart the failed input`);
      }
      const byStatus = async (status: string, why: 'restarted' | 'reached_again') => {
        const ids = (await tx<{ id: string }[]>`select id from derivation_builds where id = any(${[...returning]}::uuid[]) and status = ${status} order by id for update`).map((r) => r.id);
        const applied = await applyStatusChanges(tx, emit, ids, { event: { type: 'requeue', why }, evaluationId: found.evaluationId });
        // A person asked for another try: fresh attempts, as a restarted evaluation gives.
        await freshAttempts(tx, applied);
        return applied;
      };
      return [...(await byStatus('failed', 'restarted')), ...(await byStatus('aborted', 'reached_again'))];
    });
    await failStranded(requeued, found);
    deps.scheduler.wake();
    return 'Build restarted';
  }

  /**
   * The candidates that can run again: each input of each one is there (completed, substituted),
   * on its way (queued, started), or itself returning. Shrinks until nothing changes.
   */
  async function backTogether(tx: TransactionSql, candidates: Set<string>): Promise<Set<string>> {
    const inputs = await tx<{ id: string; input: string; status: string }[]>`
      select db.id, input.id as input, input.status from derivation_builds db
      join derivation_edges x on x.derivation_id = db.derivation_id
      join derivation_builds input on input.derivation_id = x.depends_on
      where db.id = any(${[...candidates]}::uuid[])`;
    const returning = new Set(candidates);
    for (let changed = true; changed;) {
      changed = false;
      for (const { id, input, status } of inputs) {
        if (!returning.has(id) || ['completed', 'substituted', 'queued', 'started'].includes(status) || returning.has(input)) continue;
        returning.delete(id);
        changed = true;
      }
    }
    return returning;
  }

  /**
   * An input that failed while the restart ran (its result committed, its dependents' failure not
   * yet, the restart read it before either) would leave a restarted build queued behind a failed
   * input forever. Once committed, a failure that came before is visible here, and one that comes
   * after fails the queued dependents itself: so the restarted builds that need a failed input
   * fail now as their input's dependents would, and the evaluation can end.
   */
  async function failStranded(requeued: readonly string[], found: Target): Promise<void> {
    for (let ids = requeued; ids.length > 0;) {
      const stranded = (await sql<{ id: string }[]>`
        select db.id from derivation_builds db where db.id = any(${ids as string[]}::uuid[]) and db.status = 'queued'
          and exists (select 1 from derivation_edges x join derivation_builds input on input.derivation_id = x.depends_on
                      where x.derivation_id = db.derivation_id and input.status = 'failed')
        order by db.id`).map((r) => r.id);
      if (stranded.length === 0) break;
      await events.transaction((tx, emit) => applyStatusChanges(tx, emit, stranded, {
        event: { type: 'fail', class: 'FailedPermanent', reason: 'dependency_failed' }, evaluationId: found.evaluationId,
        failure: { class: 'FailedPermanent', reason: 'dependency_failed', message: 'an input of this derivation failed while it was restarted' },
      }));
      ids = requeued.filter((id) => !stranded.includes(id));
    }
    await finish(found);
  }

  /** The evaluation ends once the abort left nothing of it queued or running. */
  async function finish(found: Target): Promise<void> {
    for (const { id } of await finishedEvaluations(sql, { evaluation: found.evaluationId })) {
      await changePhase(events, id, { event: { type: 'complete' } });
    }
  }

  return {
    act(who: Principal, buildId: string, action: BuildAction): Promise<string> {
      return action === 'abort' ? abort(who, buildId) : restart(who, buildId);
    },
  };
}
export type BuildControlService = ReturnType<typeof buildControlService>;
