// Tasks: /tasks/{project}… with a single-segment project (UUID or unique name). Every project
// has the task `default`, created with it; it cannot be deleted.
import { ApiError, type CreateTaskBody, type UpdateTaskBody } from '../../protocol/index.js';
import { userIdOf } from '../access/index.js';
import type { AccessDeps } from '../access/index.js';
import type { Principal } from '../access/index.js';
import type { Queryable } from '../../storage/index.js';
import { demandProjectRef, type ProjectRow } from '../access/index.js';

export interface TaskView {
  id: string;
  name: string;
  description: string;
  wildcard: string | null;
  branch: string | null;
  keep_evaluations: number;
  requires_approval: boolean;
  build_timeout_secs: number | null;
  build_max_silent_secs: number | null;
  created_at: Date;
  stars: number;
  /** whether the caller starred it */
  starred: boolean;
}

export const DEFAULT_TASK = 'default';

export async function listTasks(sql: Queryable, projectId: string, userId: string | null): Promise<TaskView[]> {
  return sql<TaskView[]>`
    select t.id, t.name, t.description, t.wildcard, t.branch, t.keep_evaluations, t.requires_approval,
           t.build_timeout_secs, t.build_max_silent_secs, t.created_at,
           (select count(*)::int from task_stars s where s.task_id = t.id) as stars,
           exists (select from task_stars s where s.task_id = t.id and s.user_id = ${userId}) as starred
    from tasks t where t.project_id = ${projectId} order by t.name`;
}

/** The project part of a task.* event and its scope (the project's webhooks, the task's actions). */
const taskEvent = (row: ProjectRow, task: { id: string; name: string }) => ({
  content: { project: `${row.organization}/${row.name}`, task: task.name, task_id: task.id },
  scope: { organizationId: row.organization_id, projectId: row.id, taskId: task.id },
});

export function tasksService({ sql, events }: AccessDeps) {
  async function task(who: Principal, project: string, name: string): Promise<TaskView & { project_id: string; projectRow: ProjectRow }> {
    const { row } = await demandProjectRef(sql, who, project, 'viewProject');
    const hit = (await listTasks(sql, row.id, userIdOf(who))).find((t) => t.name.toLowerCase() === name.toLowerCase());
    if (!hit) throw new ApiError('not_found', `no task "${name}" in project "${row.organization}/${row.name}"`);
    return { ...hit, project_id: row.id, projectRow: row };
  }
  const view = ({ project_id: _, projectRow: __, ...rest }: TaskView & { project_id: string; projectRow: ProjectRow }): TaskView => rest;

  return {
    async list(who: Principal, project: string): Promise<TaskView[]> {
      const { row } = await demandProjectRef(sql, who, project, 'viewProject');
      return listTasks(sql, row.id, userIdOf(who));
    },

    async get(who: Principal, project: string, name: string): Promise<TaskView> {
      return view(await task(who, project, name));
    },

    async create(who: Principal, project: string, body: CreateTaskBody): Promise<TaskView> {
      const { row } = await demandProjectRef(sql, who, project, 'manageTasks');
      const inserted = await events.transaction(async (tx, emit) => {
        const rows = await tx<{ id: string }[]>`
          insert into tasks (project_id, name, description, wildcard, branch, keep_evaluations, requires_approval, build_timeout_secs, build_max_silent_secs)
          values (${row.id}, ${body.name}, ${body.description ?? ''}, ${body.wildcard ?? null}, ${body.branch ?? null},
                  ${body.keep_evaluations ?? 30}, ${body.requires_approval ?? false}, ${body.build_timeout_secs ?? null}, ${body.build_max_silent_secs ?? null})
          on conflict (project_id, name) do nothing returning id`;
        for (const r of rows) {
          const { content, scope } = taskEvent(row, { id: r.id, name: body.name });
          emit('task.create', content, scope);
        }
        return rows;
      });
      if (inserted.length === 0) throw new ApiError('task_exists', `project "${row.organization}/${row.name}" has a task "${body.name}"`);
      return view(await task(who, row.id, body.name));
    },

    /** The fields given change (the name does not: evaluations and actions refer to the task by it). */
    async update(who: Principal, project: string, name: string, body: UpdateTaskBody): Promise<TaskView> {
      const { row } = await demandProjectRef(sql, who, project, 'manageTasks');
      const given = (key: keyof UpdateTaskBody) => body[key] !== undefined;
      const updated = await events.transaction(async (tx, emit) => {
        const rows = await tx<{ id: string; name: string }[]>`
          update tasks set
            description = coalesce(${body.description ?? null}, description),
            wildcard = case when ${given('wildcard')} then ${body.wildcard ?? null} else wildcard end,
            branch = case when ${given('branch')} then ${body.branch ?? null} else branch end,
            keep_evaluations = coalesce(${body.keep_evaluations ?? null}::integer, keep_evaluations),
            requires_approval = coalesce(${body.requires_approval ?? null}::boolean, requires_approval),
            build_timeout_secs = case when ${given('build_timeout_secs')} then ${body.build_timeout_secs ?? null}::integer else build_timeout_secs end,
            build_max_silent_secs = case when ${given('build_max_silent_secs')} then ${body.build_max_silent_secs ?? null}::integer else build_max_silent_secs end
          where project_id = ${row.id} and name = ${name} returning id, name`;
        for (const r of rows) {
          const { content, scope } = taskEvent(row, r);
          emit('task.update', content, scope);
        }
        return rows;
      });
      if (updated.length === 0) throw new ApiError('not_found', `no task "${name}" in project "${row.organization}/${row.name}"`);
      return view(await task(who, row.id, updated[0]!.name));
    },

    async remove(who: Principal, project: string, name: string): Promise<string> {
      const { row } = await demandProjectRef(sql, who, project, 'manageTasks');
      if (name.toLowerCase() === DEFAULT_TASK) throw new ApiError('default_task', 'the task "default" belongs to every project and cannot be deleted');
      // The task's actions go with it (cascade); the project's webhooks receive task.delete.
      const deleted = await events.transaction(async (tx, emit) => {
        const rows = await tx<{ id: string; name: string }[]>`delete from tasks where project_id = ${row.id} and name = ${name} returning id, name`;
        for (const r of rows) {
          const { content, scope } = taskEvent(row, r);
          emit('task.delete', content, scope);
        }
        return rows;
      });
      if (deleted.length === 0) throw new ApiError('not_found', `no task "${name}" in project "${row.organization}/${row.name}"`);
      return `task "${name}" deleted`;
    },

    /** Stars are per user; anyone who can see the project may star its tasks. */
    async star(who: Principal, project: string, name: string, starred: boolean): Promise<TaskView> {
      const t = await task(who, project, name);
      const userId = userIdOf(who);
      await events.transaction(async (tx, emit) => {
        const changed = starred
          ? await tx`insert into task_stars (task_id, user_id) values (${t.id}, ${userId}) on conflict do nothing returning task_id`
          : await tx`delete from task_stars where task_id = ${t.id} and user_id = ${userId} returning task_id`;
        // Starring twice is no change, and no event.
        if (changed.length === 0 || who.kind !== 'user') return;
        const [count] = await tx<{ n: number }[]>`select count(*)::int as n from task_stars where task_id = ${t.id}`;
        const { content, scope } = taskEvent(t.projectRow, t);
        emit(starred ? 'task.star' : 'task.unstar', { project: content.project, task: content.task, user: who.username, stars: count!.n }, scope);
      });
      return view(await task(who, project, name));
    },
  };
}
export type TasksService = ReturnType<typeof tasksService>;
