// Task action rows: per-task receivers of the same envelopes as webhooks. Every query names the
// task, so an action id of another task is simply not found. open_pr actions (docs/git-hosts.md)
// carry a command and a branch instead of a URL or recipients.
import type { ISql } from 'postgres';

export type TaskActionKind = 'send_web_request' | 'send_mail' | 'open_pr';

export interface TaskActionRow {
  id: string;
  task_id: string;
  name: string;
  kind: TaskActionKind;
  events: string[];
  url: string | null;
  mail_to: string[] | null;
  /** open_pr: the argv run on a worker, the branch pushed, the author (null: pullRequests.commitName / commitEmail) */
  command: string[] | null;
  branch: string | null;
  commit_name: string | null;
  commit_email: string | null;
  active: boolean;
  created_at: Date;
  updated_at: Date;
  last_delivery_status: string | null;
  last_delivery_at: Date | null;
  /** open_pr: its latest run (open_pr_runs), null when it never ran */
  last_run: LastOpenPrRun | null;
}

/** An open_pr action's latest run as the action view shows it. */
export interface LastOpenPrRun {
  id: string;
  evaluation_id: string;
  status: 'running' | 'retrying' | 'opened' | 'updated' | 'unchanged' | 'failed';
  attempts: number;
  pushed: string | null;
  pull_request: number | null;
  url: string | null;
  error: string | null;
  next_attempt_at: Date | null;
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
}

export interface NewTaskAction {
  name: string;
  kind: TaskActionKind;
  events: string[];
  url: string | null;
  /** sealed signing secret (send_web_request) */
  secret: Buffer | null;
  mailTo: string[] | null;
  command: string[] | null;
  branch: string | null;
  commitName: string | null;
  commitEmail: string | null;
  active: boolean;
  createdBy: string | null;
}

export interface TaskActionPatch {
  name?: string;
  events?: string[];
  url?: string;
  mailTo?: string[];
  command?: string[];
  branch?: string;
  /** null clears the action's own author (back to the instance's setting) */
  commitName?: string | null;
  commitEmail?: string | null;
  active?: boolean;
}

const columns = (sql: ISql) => sql`
  select a.id, a.task_id, a.name, a.kind, a.events, a.url, a.mail_to, a.command, a.branch, a.commit_name, a.commit_email, a.active, a.created_at, a.updated_at,
         last.status as last_delivery_status, last.created_at as last_delivery_at,
         case when run.id is null then null else json_build_object(
           'id', run.id, 'evaluation_id', run.evaluation_id, 'status', run.status, 'attempts', run.attempts, 'pushed', run.pushed,
           'pull_request', run.pull_request, 'url', run.url, 'error', run.error, 'next_attempt_at', run.next_attempt_at,
           'created_at', run.created_at, 'updated_at', run.updated_at, 'finished_at', run.finished_at) end as last_run
  from task_actions a
  left join lateral (
    select d.status, d.created_at from event_deliveries d where d.task_action_id = a.id order by d.created_at desc limit 1
  ) last on true
  left join lateral (
    select r.* from open_pr_runs r where r.task_action_id = a.id order by r.created_at desc, r.id desc limit 1
  ) run on a.kind = 'open_pr'`;

export async function listTaskActions(sql: ISql, taskId: string): Promise<TaskActionRow[]> {
  return sql<TaskActionRow[]>`${columns(sql)} where a.task_id = ${taskId} order by a.name`;
}

export async function findTaskAction(sql: ISql, taskId: string, id: string): Promise<TaskActionRow | null> {
  const [row] = await sql<TaskActionRow[]>`${columns(sql)} where a.task_id = ${taskId} and a.id = ${id}`;
  return row ?? null;
}

/** null when the task already has an action of that name. */
export async function insertTaskAction(sql: ISql, taskId: string, action: NewTaskAction): Promise<string | null> {
  const [row] = await sql<{ id: string }[]>`
    insert into task_actions (task_id, name, kind, events, url, secret, mail_to, command, branch, commit_name, commit_email, active, created_by)
    values (${taskId}, ${action.name}, ${action.kind}, ${action.events}, ${action.url}, ${action.secret},
            ${action.mailTo}, ${action.command}, ${action.branch}, ${action.commitName}, ${action.commitEmail}, ${action.active}, ${action.createdBy})
    on conflict (task_id, name) do nothing
    returning id`;
  return row?.id ?? null;
}

/** 'conflict' when the new name is taken by another action of the task. */
export async function updateTaskAction(sql: ISql, taskId: string, id: string, patch: TaskActionPatch): Promise<'updated' | 'missing' | 'conflict'> {
  try {
    const rows = await sql`
      update task_actions a set
        name = coalesce(${patch.name ?? null}, a.name),
        events = coalesce(${patch.events ?? null}::text[], a.events),
        url = coalesce(${patch.url ?? null}, a.url),
        mail_to = coalesce(${patch.mailTo ?? null}::text[], a.mail_to),
        command = coalesce(${patch.command ?? null}::text[], a.command),
        branch = coalesce(${patch.branch ?? null}, a.branch),
        commit_name = case when ${patch.commitName !== undefined} then ${patch.commitName ?? null} else a.commit_name end,
        commit_email = case when ${patch.commitEmail !== undefined} then ${patch.commitEmail ?? null} else a.commit_email end,
        active = coalesce(${patch.active ?? null}::boolean, a.active),
        updated_at = now()
      where a.task_id = ${taskId} and a.id = ${id}
      returning a.id`;
    return rows.length > 0 ? 'updated' : 'missing';
  } catch (e) {
    if ((e as { code?: string }).code === '23505') return 'conflict';
    throw e;
  }
}

export async function replaceTaskActionSecret(sql: ISql, taskId: string, id: string, secret: Buffer): Promise<boolean> {
  const rows = await sql`
    update task_actions set secret = ${secret}, updated_at = now()
    where task_id = ${taskId} and id = ${id} and kind = 'send_web_request' returning id`;
  return rows.length > 0;
}

export async function deleteTaskAction(sql: ISql, taskId: string, id: string): Promise<TaskActionRow | null> {
  const row = await findTaskAction(sql, taskId, id);
  if (!row) return null;
  await sql`delete from task_actions where task_id = ${taskId} and id = ${id}`;
  return row;
}
