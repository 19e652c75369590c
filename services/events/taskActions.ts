// Task actions: per-task receivers of the same envelopes as webhooks (/tasks/{project}/{task}/actions).
// send_web_request posts a signed envelope like a webhook; send_mail e-mails it through SMTP. Each
// run is reported as task.action.update. open_pr actions (docs/git-hosts.md) hold a command and a
// branch and receive no events. Managing them needs manageTasks on the project.
import type { Sql } from 'postgres';
import { ApiError, BranchName, type OpenPrRunView, type CreateTaskActionBody, type DeliveryListQuery, type UpdateTaskActionBody } from '../../protocol/index.js';
import {
  deleteTaskAction,
  findDelivery,
  findTaskAction,
  insertTaskAction,
  listDeliveries,
  listTaskActions,
  replaceTaskActionSecret,
  updateTaskAction,
  type Events,
  type OutboundClient,
  type SecretBox,
  type TaskActionRow,
  type LastOpenPrRun,
} from '../../storage/index.js';
import { deliveryNotFound, pageOf, toDeliveryDetail, toDeliveryView, type DeliveryDetail, type DeliveryPage } from './deliveryViews.js';
import { demandAllowedDestination } from '../access/index.js';
import type { Principal } from '../access/index.js';
import type { Queryable } from '../../storage/index.js';
import { newSigningSecret } from './signingSecret.js';
import { demandProjectRef } from '../access/index.js';

export interface TaskActionView {
  id: string;
  name: string;
  kind: 'send_web_request' | 'send_mail' | 'open_pr';
  events: string[];
  url?: string;
  to?: string[];
  command?: string[];
  branch?: string;
  commit_name?: string | null;
  commit_email?: string | null;
  /** open_pr: its latest run, null before the first */
  last_run?: OpenPrRunView | null;
  active: boolean;
  created_at: Date;
  updated_at: Date;
  last_delivery: { status: string; at: Date } | null;
}

export interface TaskActionWithSecret extends TaskActionView {
  /** send_web_request: the signing secret, shown only now */
  secret?: string;
}

export interface TaskActionsDeps {
  sql: Sql;
  events: Events;
  secretBox: SecretBox;
  /** where send_web_request actions may post (outbound.allowedNetworks) */
  outbound: Pick<OutboundClient, 'refusalOf'>;
}

interface TaskRef {
  taskId: string;
  task: string;
  projectId: string;
  project: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** json_build_object gives times as text: the view's are ISO 8601 with an offset, as every other. */
function lastRun(run: LastOpenPrRun | null): OpenPrRunView | null {
  if (!run) return null;
  const iso = (at: Date | string) => new Date(at).toISOString();
  return {
    id: run.id, evaluation_id: run.evaluation_id, status: run.status, attempts: run.attempts, pushed: run.pushed, pull_request: run.pull_request,
    pull_request_url: run.url, error: run.error, next_attempt_at: run.next_attempt_at === null ? null : iso(run.next_attempt_at),
    created_at: iso(run.created_at), updated_at: iso(run.updated_at), finished_at: run.finished_at === null ? null : iso(run.finished_at),
  };
}

function view(row: TaskActionRow): TaskActionView {
  return {
    id: row.id,
    name: row.name,
    kind: row.kind,
    events: row.events,
    ...(row.url !== null ? { url: row.url } : {}),
    ...(row.mail_to !== null ? { to: row.mail_to } : {}),
    ...(row.kind === 'open_pr' ? { command: row.command ?? [], branch: row.branch ?? '', commit_name: row.commit_name, commit_email: row.commit_email, last_run: lastRun(row.last_run) } : {}),
    active: row.active,
    created_at: row.created_at,
    updated_at: row.updated_at,
    last_delivery: row.last_delivery_status && row.last_delivery_at ? { status: row.last_delivery_status, at: row.last_delivery_at } : null,
  };
}

async function demandTask(sql: Queryable, who: Principal, project: string, task: string): Promise<TaskRef> {
  const { row } = await demandProjectRef(sql, who, project, 'manageTasks');
  const label = `${row.organization}/${row.name}`;
  const [t] = await sql<{ id: string; name: string }[]>`select id, name from tasks where project_id = ${row.id} and name = ${task}`;
  if (!t) throw new ApiError('not_found', `no task "${task}" in project "${label}"`);
  return { taskId: t.id, task: t.name, projectId: row.id, project: label };
}

/** The open_pr branch when the action names none: one per task (a task name git would refuse in a branch needs one named). */
function defaultBranch(task: string): string {
  const branch = `kiln/${task}`;
  if (!BranchName.safeParse(branch).success) throw new ApiError('invalid_body', `branch: "${branch}" is not a branch name git takes; name one`);
  return branch;
}
const OPEN_PR_FIELDS = ['command', 'branch', 'commit_name', 'commit_email'] as const;

const notFound = (id: string) => new ApiError('not_found', `no task action ${id} on this task`);

export function taskActionsService({ sql, events, secretBox, outbound }: TaskActionsDeps) {
  async function action(who: Principal, project: string, task: string, id: string): Promise<{ ref: TaskRef; row: TaskActionRow }> {
    const ref = await demandTask(sql, who, project, task);
    const row = UUID.test(id) ? await findTaskAction(sql, ref.taskId, id) : null;
    if (!row) throw notFound(id);
    return { ref, row };
  }
  const content = (ref: TaskRef, row: Pick<TaskActionRow, 'id' | 'name' | 'kind'>, changes?: string[]) => ({
    project: ref.project, task: ref.task, action_id: row.id, action: row.name, kind: row.kind, ...(changes ? { changes } : {}),
  });
  const scopeOf = (ref: TaskRef) => ({ projectId: ref.projectId, taskId: ref.taskId });

  return {
    async list(who: Principal, project: string, task: string): Promise<TaskActionView[]> {
      const ref = await demandTask(sql, who, project, task);
      return (await listTaskActions(sql, ref.taskId)).map(view);
    },

    async get(who: Principal, project: string, task: string, id: string): Promise<TaskActionView> {
      return view((await action(who, project, task, id)).row);
    },

    async create(who: Principal, project: string, task: string, body: CreateTaskActionBody): Promise<TaskActionWithSecret> {
      const ref = await demandTask(sql, who, project, task);
      if (body.kind === 'send_web_request') await demandAllowedDestination(outbound, 'url', body.url);
      const secret = body.kind === 'send_web_request' ? newSigningSecret(secretBox) : null;
      const id = await events.transaction(async (tx, emit) => {
        const openPr = body.kind === 'open_pr' ? body : null;
        const inserted = await insertTaskAction(tx, ref.taskId, {
          name: body.name,
          kind: body.kind,
          events: body.kind === 'open_pr' ? [] : body.events,
          url: body.kind === 'send_web_request' ? body.url : null,
          secret: secret?.sealed ?? null,
          mailTo: body.kind === 'send_mail' ? body.to : null,
          command: openPr?.command ?? null,
          branch: openPr ? (openPr.branch ?? defaultBranch(ref.task)) : null,
          commitName: openPr?.commit_name ?? null,
          commitEmail: openPr?.commit_email ?? null,
          active: body.active,
          createdBy: who.kind === 'user' ? who.userId : null,
        });
        if (!inserted) throw new ApiError('task_action_exists', `task "${ref.task}" has an action named "${body.name}"`);
        emit('task.action.create', content(ref, { id: inserted, name: body.name, kind: body.kind }), scopeOf(ref));
        return inserted;
      });
      const row = (await findTaskAction(sql, ref.taskId, id))!;
      return { ...view(row), ...(secret ? { secret: secret.text } : {}) };
    },

    async update(who: Principal, project: string, task: string, id: string, body: UpdateTaskActionBody): Promise<TaskActionView> {
      const { ref, row } = await action(who, project, task, id);
      if (body.url !== undefined && row.kind !== 'send_web_request') throw new ApiError('invalid_body', `url: a ${row.kind} action has no URL`);
      if (body.to !== undefined && row.kind !== 'send_mail') throw new ApiError('invalid_body', `to: a ${row.kind} action has no recipients`);
      for (const field of OPEN_PR_FIELDS) {
        if (body[field] !== undefined && row.kind !== 'open_pr') throw new ApiError('invalid_body', `${field}: a ${row.kind} action has no ${field.replace('_', ' ')}`);
      }
      if (body.events !== undefined && row.kind === 'open_pr') throw new ApiError('invalid_body', 'events: an open_pr action runs after each successful evaluation, not for events');
      if (body.url !== undefined) await demandAllowedDestination(outbound, 'url', body.url);
      await events.transaction(async (tx, emit) => {
        const { commit_name: commitName, commit_email: commitEmail, to: mailTo, ...rest } = body;
        const outcome = await updateTaskAction(tx, ref.taskId, id, {
          ...rest, ...(mailTo ? { mailTo } : {}), ...(commitName !== undefined ? { commitName } : {}), ...(commitEmail !== undefined ? { commitEmail } : {}),
        });
        if (outcome === 'missing') throw notFound(id);
        if (outcome === 'conflict') throw new ApiError('task_action_exists', `task "${ref.task}" has an action named "${body.name ?? ''}"`);
        emit('task.action.edit', content(ref, { id, name: body.name ?? row.name, kind: row.kind }, Object.keys(body)), scopeOf(ref));
      });
      return view((await findTaskAction(sql, ref.taskId, id))!);
    },

    async remove(who: Principal, project: string, task: string, id: string): Promise<string> {
      const { ref } = await action(who, project, task, id);
      await events.transaction(async (tx, emit) => {
        const gone = await deleteTaskAction(tx, ref.taskId, id);
        if (!gone) throw notFound(id);
        emit('task.action.delete', content(ref, gone), scopeOf(ref));
      });
      return `task action ${id} deleted`;
    },

    async rotateSecret(who: Principal, project: string, task: string, id: string): Promise<TaskActionWithSecret> {
      const { ref, row } = await action(who, project, task, id);
      if (row.kind !== 'send_web_request') throw new ApiError('no_signing_secret', `a ${row.kind} action has no signing secret`);
      const secret = newSigningSecret(secretBox);
      if (!(await replaceTaskActionSecret(sql, ref.taskId, id, secret.sealed))) throw notFound(id);
      return { ...view((await findTaskAction(sql, ref.taskId, id))!), secret: secret.text };
    },

    async deliveries(who: Principal, project: string, task: string, id: string, query: DeliveryListQuery): Promise<DeliveryPage> {
      await action(who, project, task, id);
      const { total, rows } = await listDeliveries(sql, { taskActionId: id }, pageOf(query));
      return { deliveries: rows.map(toDeliveryView), page: query.page, per_page: query.per_page, total };
    },

    async delivery(who: Principal, project: string, task: string, id: string, deliveryId: string): Promise<DeliveryDetail> {
      await action(who, project, task, id);
      const row = UUID.test(deliveryId) ? await findDelivery(sql, { taskActionId: id }, deliveryId) : null;
      if (!row) throw deliveryNotFound(deliveryId);
      return toDeliveryDetail(row);
    },
  };
}
export type TaskActionsService = ReturnType<typeof taskActionsService>;
