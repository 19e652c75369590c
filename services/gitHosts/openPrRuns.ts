// The open_pr task action's runs (docs/git-hosts.md, "open_pr"): when an evaluation of a branch (a
// push or a poll) completes, each active open_pr action of its task owes one run, written as a row
// of open_pr_runs by whichever server process hears it. A process with a connected evaluating
// worker serving the project takes the row (a conditional update: one taker), mints a read and a
// write token for the repository, has the worker run the command and force-push the branch
// (changeJob), and opens or updates the pull request into the evaluated branch.
// Durable like the status reports: a run that fails for a reason another try may not meet (the
// host answered 500 or 429, the worker was lost, no token) waits with doubling backoff, or as long
// as the host's Retry-After asks, up to MAX_ATTEMPTS tries; a run a process took and never ended
// (it died) is taken again when its lease is over. Each try ends in task.action.update: retrying,
// delivered or dead. A commit already pushed is not pushed again: the retry only opens the PR.
import type { Logger } from 'pino';
import type { Sql } from 'postgres';
import type { EventBus, Events } from '../../storage/index.js';
import { CoalescingLoop, type Clock, type Supervisor } from '../../supervisors/index.js';
import type { ChangeJobs } from '../builds/index.js';
import { HostApiError, type BotIdentity, type HostApi } from './hostApi.js';
import { openOrUpdatePullRequest } from './pullRequests.js';
import type { PrivateFetch } from './repositoryAccess.js';

export interface OpenPrRunnerDeps {
  sql: Sql;
  bus: EventBus;
  events: Events;
  api: HostApi;
  privateFetch(projectId: string, repository: string): Promise<PrivateFetch | null>;
  changeJobs: ChangeJobs;
  /** pullRequests.commitName / commitEmail: the author when the action names none; null there too: the app's bot user */
  author: { name: string | null; email: string | null };
  /** frontend.url: the evaluation page linked from the pull request */
  frontendUrl: string;
  log: Logger;
  clock: Clock;
  supervisor: Supervisor;
  /** the first retry's delay; each next one doubles, up to 30 minutes (default 30 s) */
  retryBaseMs?: number;
}

interface EvaluatedBranch {
  id: string;
  commit: string;
  branch: string;
  repository: string;
  task_id: string;
  task: string;
  project_id: string;
  project: string;
}

interface OpenPrAction { id: string; name: string; command: string[]; branch: string; commit_name: string | null; commit_email: string | null }

interface OwedRun { id: string; evaluation_id: string; task_action_id: string; project_id: string; status: string; next_attempt_at: Date }

type RunEnd =
  | { status: 'opened' | 'updated'; pushed: string; pullRequest: number; url: string }
  | { status: 'unchanged' }
  | { status: 'failed'; error: string; transient: boolean; retryAfterMs?: number };

/** How many tries a run gets before it is given up (dead). */
export const MAX_OPEN_PR_ATTEMPTS = 6;
const MAX_RETRY_MS = 30 * 60_000;
/** A taken run not ended by then was lost with its process: the change job's 30 minutes and the host's calls. */
const LEASE_MS = 40 * 60_000;
/** Rows one pass looks at. */
const PASS_ROWS = 50;

export class OpenPrRunner {
  private readonly loop: CoalescingLoop;
  private unsubscribe: (() => void) | null = null;
  private timer: NodeJS.Timeout | null = null;
  private readonly running = new Set<Promise<void>>();

  constructor(private readonly deps: OpenPrRunnerDeps) {
    this.loop = new CoalescingLoop(() => this.pass(), (error) => deps.log.error({ err: error }, 'an open_pr pass failed'));
    deps.supervisor.watch({ id: 'open-pr-runner', kind: 'open-pr-runner', inspect: () => this.loop.inspect() });
  }

  start(): void {
    this.unsubscribe = this.deps.bus.subscribe((event) => {
      const id = event.scope.evaluationId;
      if (event.event === 'evaluation.completed' && id !== undefined) {
        const recorded = this.owe(id).then(() => this.loop.wake(), (error: unknown) => this.deps.log.error({ err: error, evaluation: id }, 'recording the open_pr runs failed'));
        this.track(recorded);
      } else if (event.event === 'worker.connected') {
        // a run that waited for a worker serving its project may go now
        this.loop.wake();
      }
    });
    this.loop.wake();
  }

  async stop(): Promise<void> {
    this.unsubscribe?.();
    if (this.timer) clearTimeout(this.timer);
    await this.loop.stop();
    this.deps.changeJobs.failAll('the server stopped before the worker answered');
    await Promise.all([...this.running]);
  }

  /** Tests on a stepped clock: one pass now, and the runs it takes, to their end. */
  async passNow(): Promise<void> {
    this.loop.wake();
    await this.loop.settle();
    await Promise.all([...this.running]);
  }

  private track(work: Promise<void>): void {
    this.running.add(work);
    void work.finally(() => this.running.delete(work));
  }

  /** The runs an evaluation owes: one per active open_pr action of its task, due now (idempotent). */
  private async owe(evaluationId: string): Promise<void> {
    await this.deps.sql`
      insert into open_pr_runs (evaluation_id, task_action_id, status, next_attempt_at)
      select e.id, a.id, 'retrying', ${this.deps.clock.now()}
      from evaluations e join task_actions a on a.task_id = e.task_id and a.kind = 'open_pr' and a.active
      where e.id = ${evaluationId} and e.phase = 'completed' and e.trigger in ('push', 'poll') and e.branch is not null
      on conflict (evaluation_id, task_action_id) do nothing`;
  }

  private async pass(): Promise<void> {
    const { sql, clock, changeJobs } = this.deps;
    const now = clock.now();
    await this.giveUpLost(now);
    // only the runs a worker of this process serves: another process, one whose workers serve the
    // project, takes the others (or this one, once one connects); looking at them here would fill
    // every pass with runs it skips, and wake it again at once, forever
    const served = changeJobs.servedProjects();
    if (served !== 'all' && served.length === 0) return this.scheduleNext();
    const owed = await sql<OwedRun[]>`
      select r.id, r.evaluation_id, r.task_action_id, k.project_id, r.status, r.next_attempt_at
      from open_pr_runs r join evaluations e on e.id = r.evaluation_id join tasks k on k.id = e.task_id
      where r.status in ('retrying', 'running') and r.next_attempt_at <= ${now}
        and (${served === 'all'} or k.project_id = any(${served === 'all' ? [] : served}::uuid[]))
      order by r.next_attempt_at limit ${PASS_ROWS}`;
    for (const run of owed) {
      if (!changeJobs.canRun(run.project_id)) continue;
      // one taker: the row is still owed (a taker moved next_attempt_at past now); not an equality
      // on next_attempt_at, which PostgreSQL holds to the microsecond and a Date only to the millisecond
      const [taken] = await sql<{ attempts: number; pushed: string | null }[]>`
        update open_pr_runs set status = 'running', attempts = attempts + 1, next_attempt_at = ${new Date(now.getTime() + LEASE_MS)}, updated_at = ${now}
        where id = ${run.id} and status = ${run.status} and next_attempt_at <= ${now} and attempts < ${MAX_OPEN_PR_ATTEMPTS}
        returning attempts, pushed`;
      if (!taken) continue;
      this.track(this.tryRun(run, taken.attempts, taken.pushed).catch((error: unknown) => this.deps.log.error({ err: error, run: run.id }, 'an open_pr run failed unexpectedly')));
    }
    if (owed.length === PASS_ROWS) this.loop.wake();
    await this.scheduleNext();
  }

  /**
   * Runs taken MAX_OPEN_PR_ATTEMPTS times whose last taker never ended them (its process died, or
   * its end could not be written) are given up, with their task.action.update: a run that kills its
   * process is not taken forever, and whoever watched it hears that it is dead.
   */
  private async giveUpLost(now: Date): Promise<void> {
    const error = `given up after ${MAX_OPEN_PR_ATTEMPTS} tries: the last one never ended (its server process was lost)`;
    await this.deps.events.transaction(async (tx, emit) => {
      const lost = await tx<(EvaluatedBranch & { run_id: string; attempts: number; action_id: string; action: string })[]>`
        update open_pr_runs r set status = 'failed', next_attempt_at = null, updated_at = ${now}, finished_at = ${now}, error = ${error}
        from evaluations e, tasks k, projects p, organizations o, task_actions a
        where r.status in ('running', 'retrying') and r.next_attempt_at <= ${now} and r.attempts >= ${MAX_OPEN_PR_ATTEMPTS}
          and e.id = r.evaluation_id and k.id = e.task_id and p.id = k.project_id and o.id = p.organization_id and a.id = r.task_action_id
        returning r.id as run_id, r.attempts, e.id, e.commit, e.branch, e.repository, k.id as task_id, k.name as task,
          p.id as project_id, o.name || '/' || p.name as project, a.id as action_id, a.name as action`;
      for (const run of lost) {
        emit('task.action.update', {
          project: run.project, task: run.task, action_id: run.action_id, action: run.action, kind: 'open_pr', status: 'dead',
          delivery_id: run.run_id, event: 'evaluation.completed', attempt: run.attempts, evaluation_id: run.id, outcome: 'failed', error,
        }, { projectId: run.project_id, taskId: run.task_id, evaluationId: run.id });
      }
    });
  }

  /** A timer for the earliest run still owed later. */
  private async scheduleNext(): Promise<void> {
    const now = this.deps.clock.now();
    const [next] = await this.deps.sql<{ at: Date | null }[]>`
      select min(next_attempt_at) as at from open_pr_runs where status in ('retrying', 'running') and next_attempt_at > ${now}`;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (!next?.at) return;
    const delay = Math.max(0, next.at.getTime() - now.getTime());
    this.timer = setTimeout(() => this.loop.wake(), Math.min(delay, MAX_RETRY_MS) + 10);
    this.timer.unref();
  }

  private async tryRun(run: OwedRun, attempt: number, pushed: string | null): Promise<void> {
    const { sql } = this.deps;
    const [evaluation] = await sql<EvaluatedBranch[]>`
      select e.id, e.commit, e.branch, e.repository, k.id as task_id, k.name as task, p.id as project_id, o.name || '/' || p.name as project
      from evaluations e join tasks k on k.id = e.task_id join projects p on p.id = k.project_id join organizations o on o.id = p.organization_id
      where e.id = ${run.evaluation_id}`;
    const [action] = await sql<OpenPrAction[]>`
      select id, name, command, branch, commit_name, commit_email from task_actions where id = ${run.task_action_id} and kind = 'open_pr'`;
    if (!evaluation || !action) return; // deleted meanwhile: the row went with it
    // a later evaluation's run of the action makes this one's change stale
    const [newer] = await sql<{ evaluation_id: string }[]>`
      select n.evaluation_id from open_pr_runs n join open_pr_runs r on r.id = ${run.id}
      where n.task_action_id = r.task_action_id and n.id <> r.id and n.created_at > r.created_at order by n.created_at desc limit 1`;
    const end: RunEnd = newer
      ? { status: 'failed', error: `superseded by the run after evaluation ${newer.evaluation_id}`, transient: false }
      : await this.runOne(run.id, evaluation, action, pushed).catch((error: unknown): RunEnd => failedEnd(error, this.deps.clock.now().getTime()));
    await this.finish(evaluation, action, run.id, attempt, end);
  }

  private async runOne(runId: string, evaluation: EvaluatedBranch, action: OpenPrAction, alreadyPushed: string | null): Promise<RunEnd> {
    const { api, changeJobs, author } = this.deps;
    // the branch is force-pushed: never one the project evaluates (its history would be replaced),
    // and so never the evaluated one either (a push of what it pushed would run it again)
    if (await this.evaluatesBranch(evaluation, action.branch)) {
      return { status: 'failed', transient: false, error: `the action's branch "${action.branch}" is a branch the project evaluates; open_pr force-pushes its branch, so it must be one of its own` };
    }
    const fetch = await this.deps.privateFetch(evaluation.project_id, evaluation.repository);
    if (!fetch) return { status: 'failed', transient: false, error: 'the project is not linked to the Git host application (docs/git-hosts.md, "Private repositories")' };
    let pushed = alreadyPushed;
    if (pushed === null) {
      // the action's author, else the instance's, else the app's bot user (what the host writes for the app itself)
      let name = action.commit_name ?? author.name;
      let email = action.commit_email ?? author.email;
      if (name === null || email === null) {
        const bot: BotIdentity = await api.botIdentity(fetch.installationId);
        name ??= bot.name;
        email ??= bot.email;
      }
      const writeToken = await api.repositoryWriteToken(fetch.installationId, fetch.repositoryId);
      const message = `${action.name}\n\n${action.command.join(' ')} at ${evaluation.commit}, by kiln's open_pr action of ${evaluation.project}/${evaluation.task}`;
      const outcome = await changeJobs.run({
        project: evaluation.project_id, repository: fetch.repository, commit: evaluation.commit, access: fetch.access,
        command: action.command, pushTo: fetch.repository, pushAccess: { token: writeToken, resolve: fetch.access.resolve },
        branch: action.branch, author: { name, email }, message,
      });
      if (!outcome.ok) return { status: 'failed', error: outcome.error, transient: outcome.transient };
      if (outcome.pushed === null) return { status: 'unchanged' };
      pushed = outcome.pushed;
      // a retry from here on only opens the pull request
      await this.deps.sql`update open_pr_runs set pushed = ${pushed} where id = ${runId}`;
    }
    const opened = await openOrUpdatePullRequest(api, {
      installationId: fetch.installationId, repository: fetch.fullName, branch: action.branch, base: evaluation.branch,
      title: `${action.name} (${evaluation.branch})`,
      body: `\`${action.command.join(' ')}\` on ${evaluation.commit}, after [evaluation ${evaluation.id}](${this.deps.frontendUrl}/evals/${evaluation.id}) of ${evaluation.project}/${evaluation.task} succeeded.\n\nMade by kiln's open_pr action "${action.name}".`,
    });
    return { status: opened.created ? 'opened' : 'updated', pushed, pullRequest: opened.number, url: opened.url };
  }

  private async evaluatesBranch(evaluation: EvaluatedBranch, branch: string): Promise<boolean> {
    if (branch === evaluation.branch) return true;
    const [hit] = await this.deps.sql`
      select 1 from projects p where p.id = ${evaluation.project_id}
        and (p.default_branch = ${branch} or exists (select 1 from tasks k where k.project_id = p.id and k.branch = ${branch}))`;
    return hit !== undefined;
  }

  /** How long until the next try: what a rate-limited host asks for, else doubling backoff. */
  private retryDelay(attempt: number, retryAfterMs: number | undefined): number {
    const backoff = Math.min(MAX_RETRY_MS, (this.deps.retryBaseMs ?? 30_000) * 2 ** Math.min(attempt - 1, 20));
    return Math.min(MAX_RETRY_MS, Math.max(backoff, retryAfterMs ?? 0));
  }

  private async finish(evaluation: EvaluatedBranch, action: OpenPrAction, runId: string, attempt: number, end: RunEnd): Promise<void> {
    const now = this.deps.clock.now();
    const failed = end.status === 'failed' ? end : null;
    const error = failed ? failed.error.slice(0, 2000) : null;
    const retry = failed !== null && failed.transient && attempt < MAX_OPEN_PR_ATTEMPTS;
    const retryAt = failed && retry ? new Date(now.getTime() + this.retryDelay(attempt, failed.retryAfterMs)) : null;
    const opened = end.status === 'opened' || end.status === 'updated' ? end : null;
    if (error) this.deps.log.warn({ evaluation: evaluation.id, action: action.id, attempt, retryAt, error }, retry ? 'an open_pr run failed; it is tried again' : 'an open_pr run failed');
    let held = true;
    await this.deps.events.transaction(async (tx, emit) => {
      // only while this try still holds the run: one that outlived its lease was taken again (attempts
      // moved on) or given up, and that try's end is the one that counts
      const ended = await tx`
        update open_pr_runs set status = ${retry ? 'retrying' : end.status}, next_attempt_at = ${retryAt},
          pushed = coalesce(${opened?.pushed ?? null}, pushed), pull_request = ${opened?.pullRequest ?? null},
          url = ${opened?.url ?? null}, error = ${error}, updated_at = ${now}, finished_at = ${retry ? null : now}
        where id = ${runId} and status = 'running' and attempts = ${attempt}
        returning id`;
      held = ended.length > 0;
      if (!held) return;
      emit('task.action.update', {
        project: evaluation.project, task: evaluation.task, action_id: action.id, action: action.name, kind: 'open_pr',
        status: error === null ? 'delivered' : retry ? 'retrying' : 'dead', delivery_id: runId, event: 'evaluation.completed', attempt,
        evaluation_id: evaluation.id, outcome: end.status,
        ...(opened ? { pull_request: opened.pullRequest, pull_request_url: opened.url, pushed: opened.pushed } : {}),
        ...(error !== null ? { error } : {}),
      }, { projectId: evaluation.project_id, taskId: evaluation.task_id, evaluationId: evaluation.id });
    });
    if (!held) this.deps.log.warn({ evaluation: evaluation.id, action: action.id, attempt }, 'an open_pr try ended after its lease; a later try owns the run');
    else if (retryAt) await this.scheduleNext();
  }
}

/** A thrown failure as a run's end: the host's errors and anything unforeseen may pass on a later try. */
function failedEnd(error: unknown, nowMs: number): RunEnd {
  if (!(error instanceof HostApiError)) return { status: 'failed', error: error instanceof Error ? error.message : String(error), transient: true };
  const retryAfter = Number(error.headers['retry-after']);
  const reset = Number(error.headers['x-ratelimit-reset']);
  const limited = error.headers['x-ratelimit-remaining'] !== undefined && Number(error.headers['x-ratelimit-remaining']) === 0 && Number.isFinite(reset);
  const retryAfterMs = (error.status === 429 || error.status === 403) && Number.isFinite(retryAfter) ? retryAfter * 1000
    : limited ? Math.max(0, reset * 1000 - nowMs) : undefined;
  // 4xx other than a rate limit (422: the branch or base is gone, 404: no access) does not pass by itself
  const transient = error.status === 0 || error.status >= 500 || error.status === 429 || retryAfterMs !== undefined;
  return { status: 'failed', error: `the Git host: ${error.message}`, transient, ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) };
}
