// POST /api/v1/hooks/github (docs/git-hosts.md): a Git host application's webhook. The signature
// is checked first, in constant time, against gitHostApp.webhookSecretFile (read at each request,
// so a rotated secret holds at once); then the headers and the fields kiln reads. Anything wrong
// is a 4xx and nothing is recorded. A delivery is recorded by its X-GitHub-Delivery id and its
// body's SHA-256 in the transaction of what it starts, so a delivery sent again, or its body
// replayed under another id, starts nothing.
//   push                       every task (of every active project whose repository is the pushed
//                              one) whose branch is the pushed branch: an evaluation of the pushed commit
//   pull_request               opened, synchronize, reopened: the head commit, for the tasks of the
//                              pull request's base branch; closed: its open evaluations are aborted;
//                              other actions (labeled, …) and pull requests from forks start nothing
//   installation,              which repositories the application may access
//   installation_repositories
// Each evaluation started for an installation gets a status report row (statusReports.ts).
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { Sql, TransactionSql } from 'postgres';
import type { z } from 'zod';
import { readSecretFile } from '../../config/index.js';
import {
  ApiError, describeIssue, HookDeliveryId, HookEventName, HubSignature, InstallationHook, InstallationRepositoriesHook, PullRequestHook, PushHook, type HookRepository,
} from '../../protocol/index.js';
import type { Emit, Events } from '../../storage/index.js';
import { abortClosedPullRequest, insertEvaluation, parkForApproval, supersedeOlder, type TriggerOf } from '../builds/index.js';
import { vetRepository, type RepositoryPolicy } from '../projects/index.js';
import { eventRepositoryKeys, repositoryKey } from './repositoryMatch.js';

export interface HookReceiverDeps {
  sql: Sql;
  events: Events;
  /** gitHostApp.webhookSecretFile; null while gitHostApp.enable is false */
  secretFile: string | null;
  repositories: RepositoryPolicy;
  log: Logger;
  /** after new evaluations commit: the scheduler looks, retention prunes, the reporter sends, superseded ones stop */
  started(evaluations: readonly { id: string; taskId: string }[], superseded: readonly string[]): Promise<void>;
}

export interface HookOutcome {
  delivery: string;
  event: string;
  /** the delivery was seen before: nothing was done again */
  duplicate: boolean;
  /** the evaluations it started */
  evaluations: string[];
}

/** One evaluation to start: a task of a matched project at a commit. */
interface Planned {
  project: { id: string; organization_id: string; organization: string; name: string; repository: string };
  task: { id: string; name: string };
  wildcard: string;
  commit: string;
  started: TriggerOf;
  /** a pull request from a fork for a task with requires_approval (its own or its project's): parked until a member approves */
  approval: boolean;
}

/** A closed pull request: the tasks of the projects following its repository, whose open evaluations of it are aborted. */
interface ClosedPullRequest { taskIds: string[]; number: number; merged: boolean }

/** What a report row of an evaluation names; null when the event did not come through the application. */
interface ReportTarget { installationId: number; repository: string; sha: string }

const PULL_REQUEST_ACTIONS = new Set(['opened', 'synchronize', 'reopened']);

const invalid = (message: string) => new ApiError('invalid_webhook', message);

function parsed<T>(schema: z.ZodType<T>, value: unknown, event: string): T {
  const result = schema.safeParse(value);
  if (!result.success) {
    const { field, reason } = describeIssue(result.error, 'payload');
    throw invalid(`${event} payload: ${field}: ${reason}`);
  }
  return result.data;
}

export function hookReceiverService(deps: HookReceiverDeps) {
  const { sql } = deps;

  /** The checks that need no body: refused here, an unsigned request is never read (up to 25 MB) into memory. */
  function admit(signature: string | undefined): { secretFile: string; signature: string } {
    if (deps.secretFile === null) throw new ApiError('git_host_disabled', 'the Git host application is not enabled on this instance (gitHostApp.enable)');
    if (signature === undefined) throw new ApiError('invalid_signature', 'X-Hub-Signature-256 is missing');
    const shape = HubSignature.safeParse(signature);
    if (!shape.success) throw new ApiError('invalid_signature', 'X-Hub-Signature-256: expected sha256= and 64 lowercase hex digits');
    return { secretFile: deps.secretFile, signature };
  }

  /** 401 unless the signature is the body's HMAC under the secret (compared in constant time by @octokit/webhooks). */
  async function verify(body: Buffer, header: string | undefined): Promise<void> {
    const { secretFile, signature } = admit(header);
    if (body.length === 0) throw new ApiError('invalid_signature', 'X-Hub-Signature-256 does not match the body: the body is empty');
    // The HMAC is over the bytes; a body that is not UTF-8 could not have been signed as the same string, so it fails here too.
    const text = body.toString('utf8');
    // @octokit/webhooks at the first delivery, not at start (docs/http.md, "Memory at rest")
    const { Webhooks } = await import('@octokit/webhooks');
    const same = Buffer.byteLength(text) === body.length && await new Webhooks({ secret: readSecretFile(secretFile) }).verify(text, signature);
    if (!same) throw new ApiError('invalid_signature', 'X-Hub-Signature-256 does not match the body under the configured webhook secret');
  }

  /** The active projects whose repository is the event's, each with its tasks (the default one made if missing). */
  async function matchingTasks(repository: HookRepository) {
    const keys = eventRepositoryKeys(repository);
    const projects = await sql<(Planned['project'] & { wildcard: string; default_branch: string | null; requires_approval: boolean })[]>`
      select p.id, p.organization_id, o.name as organization, p.name, p.repository, p.wildcard, p.default_branch, p.requires_approval
      from projects p join organizations o on o.id = p.organization_id where p.active`;
    const matched = projects.filter((p) => {
      const key = repositoryKey(p.repository);
      return key !== null && keys.has(key);
    });
    const found = [];
    for (const project of matched) {
      await sql`insert into tasks (project_id, name) values (${project.id}, 'default') on conflict (project_id, name) do nothing`;
      const tasks = await sql<{ id: string; name: string; wildcard: string | null; branch: string | null; requires_approval: boolean }[]>`
        select id, name, wildcard, branch, requires_approval from tasks where project_id = ${project.id} and name <> 'direct' order by name`;
      for (const task of tasks) {
        found.push({ project, task, requiresApproval: task.requires_approval || project.requires_approval, branch: task.branch ?? project.default_branch ?? repository.default_branch, wildcard: task.wildcard ?? project.wildcard });
      }
    }
    return found;
  }

  /**
   * The tasks to evaluate for `branch`, leaving out projects whose repository the instance no longer
   * accepts. `fromFork`: only tasks with requires_approval (their own or the project's), each parked for approval.
   */
  async function plan(repository: HookRepository, branch: string, commit: string, started: TriggerOf, fromFork = false): Promise<Planned[]> {
    const planned: Planned[] = [];
    for (const m of await matchingTasks(repository)) {
      if (m.branch !== branch) continue;
      if (fromFork && !m.requiresApproval) continue;
      try {
        await vetRepository(m.project.repository, deps.repositories);
      } catch (error) {
        deps.log.warn({ project: `${m.project.organization}/${m.project.name}`, err: error }, 'a webhook matched a project whose repository is refused; not evaluated');
        continue;
      }
      const { wildcard, default_branch: _branch, requires_approval: _approval, ...project } = m.project;
      planned.push({ project, task: { id: m.task.id, name: m.task.name }, wildcard: m.wildcard, commit, started, approval: fromFork });
    }
    return planned;
  }

  /**
   * False when the delivery was seen: the same id (the host's redelivery), or the same body under
   * another id (a replay: the signature covers the body only, so a captured delivery re-sent with a
   * fresh X-GitHub-Delivery would pass it). Either unique index refuses the row.
   */
  async function recordDelivery(tx: TransactionSql, delivery: string, event: string, bodyHash: Buffer): Promise<boolean> {
    const rows = await tx`insert into git_host_deliveries (id, event, body_sha256) values (${delivery}, ${event}, ${bodyHash}) on conflict do nothing returning id`;
    return rows.length === 1;
  }

  async function upsertInstallation(tx: TransactionSql, id: number, account: string): Promise<void> {
    await tx`
      insert into git_host_installations (id, account) values (${id}, ${account})
      on conflict (id) do update set account = excluded.account, updated_at = now()`;
  }

  async function addRepositories(tx: TransactionSql, installationId: number, repositories: readonly { id: number; full_name: string }[]): Promise<void> {
    for (const r of repositories) {
      await tx`
        insert into git_host_repositories (installation_id, repository_id, full_name) values (${installationId}, ${r.id}, ${r.full_name.toLowerCase()})
        on conflict (installation_id, repository_id) do update set full_name = excluded.full_name`;
    }
  }

  async function installation(tx: TransactionSql, hook: InstallationHook): Promise<void> {
    const { id, account } = hook.installation;
    if (hook.action === 'deleted') {
      await tx`delete from git_host_installations where id = ${id}`;
      return;
    }
    await upsertInstallation(tx, id, account.login);
    if (hook.action === 'suspend' || hook.action === 'unsuspend') {
      await tx`update git_host_installations set suspended = ${hook.action === 'suspend'} where id = ${id}`;
    }
    if (hook.action === 'created' && hook.repositories) await addRepositories(tx, id, hook.repositories);
  }

  async function installationRepositories(tx: TransactionSql, hook: InstallationRepositoriesHook): Promise<void> {
    const { id, account } = hook.installation;
    await upsertInstallation(tx, id, account.login);
    await addRepositories(tx, id, hook.repositories_added);
    const removed = hook.repositories_removed.map((r) => r.id);
    if (removed.length > 0) await tx`delete from git_host_repositories where installation_id = ${id} and repository_id = any(${removed}::bigint[])`;
  }

  /** Writes the evaluations and their report rows; returns their ids and those of the evaluations they (or a closed pull request) aborted. */
  async function startAll(tx: TransactionSql, emit: Emit, planned: readonly Planned[], report: ReportTarget | null, closed: ClosedPullRequest | null) {
    const started: { id: string; taskId: string }[] = [];
    const superseded: string[] = closed ? await abortClosedPullRequest(tx, emit, closed.taskIds, closed.number, closed.merged) : [];
    for (const p of planned) {
      const id = await insertEvaluation(tx, emit, { project: p.project, task: p.task, commit: p.commit, wildcard: p.wildcard, started: p.started, createdBy: null });
      superseded.push(...await supersedeOlder(tx, emit, { id, taskId: p.task.id, commit: p.commit, started: p.started }));
      if (p.approval) await parkForApproval(tx, emit, id, 'waiting for approval: a pull request from a fork (POST /evals/{id} {"method": "approve"})');
      started.push({ id, taskId: p.task.id });
      if (report) {
        await tx`
          insert into git_host_reports (evaluation_id, installation_id, repository, head_sha, name)
          values (${id}, ${report.installationId}, ${report.repository}, ${report.sha}, ${`kiln: ${p.project.organization}/${p.project.name} ${p.task.name}`})`;
      }
    }
    return { started, superseded };
  }

  return {
    /** Before the body is read: 404/401 for what no body can make right (gitHostApp disabled, no or a malformed signature header). */
    admit(header: (name: string) => string | undefined): void {
      admit(header('x-hub-signature-256'));
    },

    async receive(header: (name: string) => string | undefined, body: Buffer): Promise<HookOutcome> {
      await verify(body, header('x-hub-signature-256'));
      const eventHeader = header('x-github-event');
      const deliveryHeader = header('x-github-delivery');
      if (eventHeader === undefined) throw invalid('X-GitHub-Event is missing');
      if (deliveryHeader === undefined) throw invalid('X-GitHub-Delivery is missing');
      const event = HookEventName.safeParse(eventHeader);
      if (!event.success) throw invalid('X-GitHub-Event: expected an event name such as push');
      const delivery = HookDeliveryId.safeParse(deliveryHeader);
      if (!delivery.success) throw invalid('X-GitHub-Delivery: expected the delivery id (letters, digits, ".", "_", "-", at most 200)');
      let payload: unknown;
      try {
        payload = JSON.parse(body.toString('utf8'));
      } catch (e) {
        throw invalid(`the body is not JSON: ${(e as Error).message}`);
      }
      if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) throw invalid('the body is not a JSON object');
      const name = event.data;
      const outcome = { delivery: delivery.data, event: name };

      // Everything read from the payload and every repository check happens before the transaction.
      let planned: Planned[] = [];
      let report: ReportTarget | null = null;
      let apply: ((tx: TransactionSql) => Promise<void>) | null = null;
      let closed: ClosedPullRequest | null = null;
      if (name === 'push') {
        const hook = parsed(PushHook, payload, name);
        if (hook.ref.startsWith('refs/heads/') && hook.deleted !== true && !/^0+$/.test(hook.after)) {
          const branch = hook.ref.slice('refs/heads/'.length);
          planned = await plan(hook.repository, branch, hook.after, { trigger: 'push', branch });
        }
        if (hook.installation) report = { installationId: hook.installation.id, repository: hook.repository.full_name, sha: hook.after };
      } else if (name === 'pull_request') {
        const hook = parsed(PullRequestHook, payload, name);
        const { head, base } = hook.pull_request;
        // A fork's head is code anyone on the host may write: evaluating it would run a stranger's
        // code with the project's workers, credentials and caches. Only tasks with requires_approval
        // take it, parked until a member approves; other tasks start nothing for it.
        const fromFork = head.repo?.id !== hook.repository.id;
        if (PULL_REQUEST_ACTIONS.has(hook.action)) {
          planned = await plan(hook.repository, base.ref, head.sha, { trigger: 'pull_request', pullRequest: hook.number }, fromFork);
          if (fromFork) deps.log.info({ repository: hook.repository.full_name, pullRequest: hook.number, parked: planned.length }, 'a pull request from a fork (or a deleted one): parked for approval where a task requires it, else nothing');
        } else if (hook.action === 'closed') {
          // Closed or merged: its head will not be merged as it is (a merge is followed by a push of
          // the base branch), so what still runs for it is wasted work. Every task of the following
          // projects, whatever branch it follows now: the base branch may have been changed since.
          const taskIds = [...new Set((await matchingTasks(hook.repository)).map((m) => m.task.id))];
          closed = { taskIds, number: hook.number, merged: hook.pull_request.merged === true };
        }
        if (hook.installation) report = { installationId: hook.installation.id, repository: hook.repository.full_name, sha: hook.pull_request.head.sha };
      } else if (name === 'installation') {
        const hook = parsed(InstallationHook, payload, name);
        apply = (tx) => installation(tx, hook);
      } else if (name === 'installation_repositories') {
        const hook = parsed(InstallationRepositoriesHook, payload, name);
        apply = (tx) => installationRepositories(tx, hook);
      }

      const result = await deps.events.transaction(async (tx, emit) => {
        if (!(await recordDelivery(tx, outcome.delivery, name, createHash('sha256').update(body).digest()))) return null;
        await apply?.(tx);
        return startAll(tx, emit, planned, report, closed);
      });
      if (result === null) return { ...outcome, duplicate: true, evaluations: [] };
      if (result.started.length > 0 || result.superseded.length > 0) await deps.started(result.started, result.superseded);
      return { ...outcome, duplicate: false, evaluations: result.started.map((r) => r.id) };
    },
  };
}
export type HookReceiverService = ReturnType<typeof hookReceiverService>;
