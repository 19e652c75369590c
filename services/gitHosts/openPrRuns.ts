// The open_pr task action's trigger (docs/git-hosts.md, "open_pr"): when an evaluation of a branch
// (a push or a poll) completes, each active open_pr action of its task runs once: the project must
// be linked to the Git host application; the server mints a read and a write token for the
// repository, a connected evaluating worker runs the command and force-pushes the branch
// (changeJob), and the server opens or updates the pull request into the evaluated branch. Each
// run is a row of open_pr_runs (the claim, so two processes never run one twice, and what the
// action last did) and ends in task.action.update with the pull request or the failure.
import type { Logger } from 'pino';
import type { Sql } from 'postgres';
import type { EventBus, Events } from '../../storage/index.js';
import type { ChangeJobs } from '../builds/index.js';
import { HostApiError, type HostApi } from './hostApi.js';
import { openOrUpdatePullRequest } from './pullRequests.js';
import type { PrivateFetch } from './repositoryAccess.js';

export interface OpenPrRunnerDeps {
  sql: Sql;
  bus: EventBus;
  events: Events;
  api: HostApi;
  privateFetch(projectId: string, repository: string): Promise<PrivateFetch | null>;
  changeJobs: ChangeJobs;
  /** pullRequests.commitName / commitEmail: the author when the action names none */
  author: { name: string | null; email: string | null };
  /** frontend.url: the evaluation page linked from the pull request */
  frontendUrl: string;
  log: Logger;
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

type RunEnd = { status: 'opened' | 'updated'; pushed: string; pullRequest: number; url: string } | { status: 'unchanged' } | { status: 'failed'; error: string };

export class OpenPrRunner {
  private unsubscribe: (() => void) | null = null;
  private readonly running = new Set<Promise<void>>();

  constructor(private readonly deps: OpenPrRunnerDeps) {}

  start(): void {
    this.unsubscribe = this.deps.bus.subscribe((event) => {
      const id = event.scope.evaluationId;
      if (event.event !== 'evaluation.completed' || id === undefined) return;
      const run = this.evaluated(id).catch((error: unknown) => this.deps.log.error({ err: error, evaluation: id }, 'running the open_pr actions failed'));
      this.running.add(run);
      void run.finally(() => this.running.delete(run));
    });
  }

  async stop(): Promise<void> {
    this.unsubscribe?.();
    this.deps.changeJobs.failAll('the server stopped before the worker answered');
    await Promise.all([...this.running]);
  }

  private async evaluated(evaluationId: string): Promise<void> {
    const { sql } = this.deps;
    const [evaluation] = await sql<EvaluatedBranch[]>`
      select e.id, e.commit, e.branch, e.repository, k.id as task_id, k.name as task, p.id as project_id, o.name || '/' || p.name as project
      from evaluations e join tasks k on k.id = e.task_id join projects p on p.id = k.project_id join organizations o on o.id = p.organization_id
      where e.id = ${evaluationId} and e.phase = 'completed' and e.trigger in ('push', 'poll') and e.branch is not null`;
    if (!evaluation) return;
    const actions = await sql<OpenPrAction[]>`
      select id, name, command, branch, commit_name, commit_email from task_actions
      where task_id = ${evaluation.task_id} and kind = 'open_pr' and active order by name`;
    // another process, one whose workers serve the project, takes it
    if (actions.length === 0 || !this.deps.changeJobs.canRun(evaluation.project_id)) return;
    for (const action of actions) {
      const [claimed] = await sql<{ id: string }[]>`
        insert into open_pr_runs (evaluation_id, task_action_id) values (${evaluation.id}, ${action.id})
        on conflict (evaluation_id, task_action_id) do nothing returning id`;
      if (!claimed) continue;
      const end = await this.runOne(evaluation, action).catch((error: unknown): RunEnd => ({ status: 'failed', error: describe(error) }));
      await this.finish(evaluation, action, claimed.id, end);
    }
  }

  private async runOne(evaluation: EvaluatedBranch, action: OpenPrAction): Promise<RunEnd> {
    const { api, changeJobs, author } = this.deps;
    // the branch is force-pushed: never one the project evaluates (its history would be replaced),
    // and so never the evaluated one either (a push of what it pushed would run it again)
    if (await this.evaluatesBranch(evaluation, action.branch)) {
      return { status: 'failed', error: `the action's branch "${action.branch}" is a branch the project evaluates; open_pr force-pushes its branch, so it must be one of its own` };
    }
    const fetch = await this.deps.privateFetch(evaluation.project_id, evaluation.repository);
    if (!fetch) return { status: 'failed', error: 'the project is not linked to the Git host application (docs/git-hosts.md, "Private repositories")' };
    const writeToken = await api.repositoryWriteToken(fetch.installationId, fetch.repositoryId);
    const message = `${action.name}\n\n${action.command.join(' ')} at ${evaluation.commit}, by kiln's open_pr action of ${evaluation.project}/${evaluation.task}`;
    const outcome = await changeJobs.run({
      project: evaluation.project_id, repository: fetch.repository, commit: evaluation.commit, access: fetch.access,
      command: action.command, pushTo: fetch.repository, pushAccess: { token: writeToken, resolve: fetch.access.resolve },
      branch: action.branch, author: { name: action.commit_name ?? author.name, email: action.commit_email ?? author.email }, message,
    });
    if (!outcome.ok) return { status: 'failed', error: outcome.error };
    if (outcome.pushed === null) return { status: 'unchanged' };
    const opened = await openOrUpdatePullRequest(api, {
      installationId: fetch.installationId, repository: fetch.fullName, branch: action.branch, base: evaluation.branch,
      title: `${action.name} (${evaluation.branch})`,
      body: `\`${action.command.join(' ')}\` on ${evaluation.commit}, after [evaluation ${evaluation.id}](${this.deps.frontendUrl}/evals/${evaluation.id}) of ${evaluation.project}/${evaluation.task} succeeded.\n\nMade by kiln's open_pr action "${action.name}".`,
    });
    return { status: opened.created ? 'opened' : 'updated', pushed: outcome.pushed, pullRequest: opened.number, url: opened.url };
  }

  private async evaluatesBranch(evaluation: EvaluatedBranch, branch: string): Promise<boolean> {
    if (branch === evaluation.branch) return true;
    const [hit] = await this.deps.sql`
      select 1 from projects p where p.id = ${evaluation.project_id}
        and (p.default_branch = ${branch} or exists (select 1 from tasks k where k.project_id = p.id and k.branch = ${branch}))`;
    return hit !== undefined;
  }

  private async finish(evaluation: EvaluatedBranch, action: OpenPrAction, runId: string, end: RunEnd): Promise<void> {
    const error = end.status === 'failed' ? end.error.slice(0, 2000) : null;
    const opened = end.status === 'opened' || end.status === 'updated' ? end : null;
    if (error) this.deps.log.warn({ evaluation: evaluation.id, action: action.id, error }, 'an open_pr action failed');
    await this.deps.events.transaction(async (tx, emit) => {
      await tx`
        update open_pr_runs set status = ${end.status}, pushed = ${opened?.pushed ?? null}, pull_request = ${opened?.pullRequest ?? null},
          url = ${opened?.url ?? null}, error = ${error}, finished_at = now()
        where id = ${runId}`;
      emit('task.action.update', {
        project: evaluation.project, task: evaluation.task, action_id: action.id, action: action.name, kind: 'open_pr',
        status: error === null ? 'delivered' : 'dead', delivery_id: runId, event: 'evaluation.completed', attempt: 1,
        evaluation_id: evaluation.id, outcome: end.status,
        ...(opened ? { pull_request: opened.pullRequest, pull_request_url: opened.url, pushed: opened.pushed } : {}),
        ...(error !== null ? { error } : {}),
      }, { projectId: evaluation.project_id, taskId: evaluation.task_id, evaluationId: evaluation.id });
    });
  }
}

function describe(error: unknown): string {
  if (error instanceof HostApiError) return `the Git host: ${error.message}`;
  return error instanceof Error ? error.message : String(error);
}
