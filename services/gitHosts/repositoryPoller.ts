// Polling, for repositories without a Git host application (docs/git-hosts.md, "Polling"): a
// project with poll_interval_secs is asked for its branch heads (`git ls-remote`) every that many
// seconds; when the head of a task's branch moved since the last poll, the task gets an
// evaluation of the new head (trigger `poll`). The first poll of a branch only records its head.
// Due projects are claimed with `for update skip locked` (their next_poll_at moved on in the same
// statement), so several server processes poll each project once. Each repository is checked
// against the repository policy before git runs, as for a manual evaluation. A project linked to
// the Git host application's installation (repositoryAccess.ts) is listed at the host's clone URL
// with the same repository-scoped read token its evaluations are fetched with, which reaches git
// through its environment only (never a row, a log line, the URL or the command line).
import type { Logger } from 'pino';
import type { Sql } from 'postgres';
import type { Events } from '../../storage/index.js';
import { CoalescingLoop, type Clock, type Supervisor } from '../../supervisors/index.js';
import { insertEvaluation, supersedeOlder } from '../builds/index.js';
import { listHeads, vetRepository, type RepositoryHeads, type RepositoryPolicy } from '../projects/index.js';
import type { PrivateFetch } from './repositoryAccess.js';

export interface PollerDeps {
  sql: Sql;
  events: Events;
  repositories: RepositoryPolicy;
  log: Logger;
  clock: Clock;
  supervisor: Supervisor;
  /** after new evaluations commit: the scheduler looks, retention prunes, superseded ones stop */
  started(evaluations: readonly { id: string; taskId: string }[], superseded: readonly string[]): Promise<void>;
  /** how a linked private repository is reached (with the Git host application on); null: as any repository */
  privateFetch?: (projectId: string, repository: string) => Promise<PrivateFetch | null>;
  /** how often due projects are looked for (default 1 s; a project's own interval is at least projects.minPollIntervalSecs) */
  tickMs?: number;
}

interface PolledProject {
  id: string;
  organization_id: string;
  organization: string;
  name: string;
  repository: string;
  wildcard: string;
  default_branch: string | null;
}

interface PolledTask { id: string; name: string; wildcard: string | null; branch: string | null }

/** Projects one pass claims; the rest are due again at the next tick. */
const PASS_PROJECTS = 20;

/** git on the host's clone URL (http or https): no other transport, no redirects (the token goes only where it was checked). */
const HOSTED_GIT_OPTIONS = ['protocol.allow=never', 'protocol.http.allow=always', 'protocol.https.allow=always', 'http.followRedirects=false'];

export class RepositoryPoller {
  private readonly loop: CoalescingLoop;
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly deps: PollerDeps) {
    this.loop = new CoalescingLoop(() => this.pass(), (error) => deps.log.error({ err: error }, 'a repository poll pass failed'));
    deps.supervisor.watch({ id: 'repository-poller', kind: 'repository-poller', inspect: () => this.loop.inspect() });
  }

  start(): void {
    this.timer = setInterval(() => this.loop.wake(), this.deps.tickMs ?? 1000);
    this.timer.unref();
    this.loop.wake();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.loop.stop();
  }

  private async pass(): Promise<void> {
    const { sql, clock } = this.deps;
    const now = clock.now();
    const due = await sql<PolledProject[]>`
      update projects p set next_poll_at = ${now}::timestamptz + make_interval(secs => p.poll_interval_secs)
      from (
        select id from projects
        where active and poll_interval_secs is not null and coalesce(next_poll_at, '-infinity') <= ${now}
        order by next_poll_at nulls first limit ${PASS_PROJECTS} for update skip locked
      ) d, organizations o
      where p.id = d.id and o.id = p.organization_id
      returning p.id, p.organization_id, o.name as organization, p.name, p.repository, p.wildcard, p.default_branch`;
    for (const project of due) {
      try {
        await this.pollOne(project);
      } catch (error) {
        this.deps.log.error({ project: `${project.organization}/${project.name}`, err: error }, 'polling a repository failed');
      }
    }
    if (due.length === PASS_PROJECTS) this.loop.wake();
  }

  private async pollOne(project: PolledProject): Promise<void> {
    const { sql, log } = this.deps;
    const label = `${project.organization}/${project.name}`;
    let heads: RepositoryHeads;
    try {
      const options = await vetRepository(project.repository, this.deps.repositories);
      const privately = (await this.deps.privateFetch?.(project.id, project.repository)) ?? null;
      heads = privately ? await listHeads(privately.repository, HOSTED_GIT_OPTIONS, privately.access) : await listHeads(project.repository, options);
    } catch (error) {
      log.warn({ project: label, err: error instanceof Error ? error.message : String(error) }, 'a polled repository is refused or unreachable; polled again at its next interval');
      return;
    }
    await sql`insert into tasks (project_id, name) values (${project.id}, 'default') on conflict (project_id, name) do nothing`;
    const tasks = await sql<PolledTask[]>`
      select id, name, wildcard, branch from tasks where project_id = ${project.id} and name <> 'direct' order by name`;
    const byBranch = new Map<string, PolledTask[]>();
    for (const task of tasks) {
      const branch = task.branch ?? project.default_branch ?? heads.head;
      if (branch === null || !heads.branches.has(branch)) continue;
      byBranch.set(branch, [...(byBranch.get(branch) ?? []), task]);
    }
    const started: { id: string; taskId: string }[] = [];
    const superseded: string[] = [];
    for (const [branch, branchTasks] of byBranch) {
      const commit = heads.branches.get(branch)!;
      const made = await this.deps.events.transaction(async (tx, emit) => {
        // Moves the recorded head only if it moved (a process polling the same project at once finds no row to move).
        const [previous] = await tx<{ commit: string | null }[]>`
          with old as (select commit from project_polled_heads where project_id = ${project.id} and branch = ${branch})
          insert into project_polled_heads (project_id, branch, commit) values (${project.id}, ${branch}, ${commit})
          on conflict (project_id, branch) do update set commit = excluded.commit, seen_at = now()
            where project_polled_heads.commit <> excluded.commit
          returning (select commit from old) as commit`;
        if (!previous || previous.commit === null) return []; // unchanged, or first seen: recorded only
        const ids: { id: string; taskId: string }[] = [];
        for (const task of branchTasks) {
          // a push webhook (or a person) may have started this commit already
          const [seen] = await tx`select 1 from evaluations where task_id = ${task.id} and commit = ${commit} limit 1`;
          if (seen) continue;
          const id = await insertEvaluation(tx, emit, {
            project, task: { id: task.id, name: task.name }, commit, wildcard: task.wildcard ?? project.wildcard, started: { trigger: 'poll', branch }, createdBy: null,
          });
          superseded.push(...await supersedeOlder(tx, emit, { id, taskId: task.id, commit, started: { trigger: 'poll', branch } }));
          ids.push({ id, taskId: task.id });
        }
        return ids;
      });
      if (made.length > 0) log.info({ project: label, branch, commit, evaluations: made.map((m) => m.id) }, 'a polled branch head moved');
      started.push(...made);
    }
    if (started.length > 0) await this.deps.started(started, superseded);
  }
}
