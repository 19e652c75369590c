// Projects: their views, events and use cases.
import { ApiError, type CreateProjectBody, type Permission, type Role, type UpdateProjectBody } from '../../protocol/index.js';
import { accessOf, demand, notFound, permissionList, userIdOf, type Access } from '../access/index.js';
import type { AccessDeps } from '../access/index.js';
import { demandCreationAllowed } from '../access/index.js';
import { listMembers, type MemberView } from '../access/index.js';
import type { Principal } from '../access/index.js';
import { checkRepository, type RepositoryCheck } from './repositoryCheck.js';
import { vetRepository } from './repositoryPolicy.js';
import { demandNotStateManaged } from '../access/index.js';
import { listProjectSubscriptions, type ProjectSubscriptions } from '../caches/index.js';
import {
  demandOrganization, demandProject, findOrganization, findProjectById, listProjectsOfOrganization, organizationTarget, projectTarget, type ProjectRow,
} from '../access/index.js';
import { DEFAULT_TASK, listTasks, type TaskView } from './tasks.js';

/** A project as the API shows it: its row without the internal organization id, plus the caller's permissions. */
export type ProjectView = Omit<ProjectRow, 'organization_id'> & { permissions: Permission[] };

export interface ProjectDetails {
  project: ProjectView;
  tasks: TaskView[];
  subscriptions: ProjectSubscriptions;
  members: MemberView[];
}

export const toProjectView = (row: ProjectRow, access: Access): ProjectView => ({
  id: row.id, organization: row.organization, name: row.name, display_name: row.display_name,
  description: row.description, repository: row.repository, wildcard: row.wildcard,
  default_branch: row.default_branch, poll_interval_secs: row.poll_interval_secs,
  cancel_superseded: row.cancel_superseded, requires_approval: row.requires_approval, active: row.active, state_managed: row.state_managed,
  created_at: row.created_at, role: row.role, permissions: permissionList(access),
});

const isUniqueViolation = (e: unknown): boolean => typeof e === 'object' && e !== null && (e as { code?: string }).code === '23505';

/** The content of a project.* event and its scope: the project's webhooks and the organization's. */
export const projectEvent = (row: Pick<ProjectRow, 'id' | 'organization_id' | 'organization' | 'name'>) => ({
  content: { project: `${row.organization}/${row.name}`, project_id: row.id },
  scope: { organizationId: row.organization_id, projectId: row.id },
});

export function projectsService({ sql, config, events }: AccessDeps) {
  async function byId(who: Principal, id: string): Promise<ProjectView> {
    const row = await findProjectById(sql, who, id);
    if (!row) throw notFound(`project ${id}`);
    return toProjectView(row, demand(who, projectTarget(row), 'viewProject'));
  }

  const repositoryPolicy = () => ({ allowLocal: config['projects.allowLocalRepositories'] });
  /** poll_interval_secs as given (null: no polling), refused below the instance's minimum */
  const demandPollInterval = (secs: number | null | undefined): number | null => {
    if (secs === undefined || secs === null) return null;
    const min = config['projects.minPollIntervalSecs'];
    if (secs < min) throw new ApiError('invalid_body', `poll_interval_secs: at least ${min} on this instance (projects.minPollIntervalSecs)`);
    return secs;
  };

  return {
    /** The organization's projects the caller can see; 404 when it sees neither the organization nor any of them. */
    async list(who: Principal, org: string): Promise<ProjectView[]> {
      const organization = await findOrganization(sql, who, org);
      if (!organization) throw notFound(`organization "${org}"`);
      const visible = (await listProjectsOfOrganization(sql, who, organization.id)).flatMap((row) => {
        const access = accessOf(who, projectTarget(row));
        return access.visible ? [toProjectView(row, access)] : [];
      });
      if (visible.length === 0 && !accessOf(who, organizationTarget(organization)).visible) throw notFound(`organization "${org}"`);
      return visible;
    },

    /** permissions.createProject decides who may; createProject on the organization is needed too. Comes with the task `default`. */
    async create(who: Principal, org: string, body: CreateProjectBody): Promise<ProjectView> {
      const userId = userIdOf(who);
      const { row: organization } = await demandOrganization(sql, who, org, 'createProject');
      demandCreationAllowed(who, config['permissions.createProject'], 'projects', 'permissions.createProject');
      await vetRepository(body.repository, repositoryPolicy());
      const poll = demandPollInterval(body.poll_interval_secs);
      try {
        const id = await events.transaction(async (tx, emit) => {
          const [project] = await tx<{ id: string }[]>`
            insert into projects (organization_id, name, display_name, description, repository, wildcard, default_branch, created_by, poll_interval_secs, next_poll_at,
                                  cancel_superseded, requires_approval)
            values (${organization.id}, ${body.name}, ${body.display_name ?? ''}, ${body.description ?? ''}, ${body.repository},
                    ${body.wildcard ?? 'packages.*.*'}, ${body.default_branch ?? null}, ${userId}, ${poll}, ${poll === null ? null : sql`now()`},
                    ${body.cancel_superseded ?? true}, ${body.requires_approval ?? false})
            returning id`;
          const [task] = await tx<{ id: string }[]>`insert into tasks (project_id, name) values (${project!.id}, ${DEFAULT_TASK}) returning id`;
          const { content, scope } = projectEvent({ id: project!.id, organization_id: organization.id, organization: organization.name, name: body.name });
          emit('project.create', { ...content, repository: body.repository, active: true }, scope);
          emit('task.create', { project: content.project, task: DEFAULT_TASK, task_id: task!.id }, { ...scope, taskId: task!.id });
          return project!.id;
        });
        return byId(who, id);
      } catch (e) {
        if (isUniqueViolation(e)) throw new ApiError('project_exists', `organization "${organization.name}" has a project "${body.name}"`);
        throw e;
      }
    },

    async get(who: Principal, org: string, name: string): Promise<ProjectView> {
      const { row, access } = await demandProject(sql, who, org, name, 'viewProject');
      return toProjectView(row, access);
    },

    async update(who: Principal, org: string, name: string, body: UpdateProjectBody): Promise<ProjectView> {
      const { row, target } = await demandProject(sql, who, org, name, 'manageProject');
      demandNotStateManaged(row, target.label);
      if (body.repository !== undefined) await vetRepository(body.repository, repositoryPolicy());
      const branchGiven = body.default_branch !== undefined;
      const pollGiven = body.poll_interval_secs !== undefined;
      const poll = demandPollInterval(body.poll_interval_secs);
      const changes = Object.keys(body).filter((k) => body[k as keyof UpdateProjectBody] !== undefined);
      await events.transaction(async (tx, emit) => {
        await tx`
          update projects set
            repository = coalesce(${body.repository ?? null}, repository),
            display_name = coalesce(${body.display_name ?? null}, display_name),
            description = coalesce(${body.description ?? null}, description),
            wildcard = coalesce(${body.wildcard ?? null}, wildcard),
            default_branch = case when ${branchGiven} then ${body.default_branch ?? null} else default_branch end,
            poll_interval_secs = case when ${pollGiven} then ${poll}::integer else poll_interval_secs end,
            next_poll_at = case when ${pollGiven} then (case when ${poll}::integer is null then null else now() end) else next_poll_at end,
            cancel_superseded = coalesce(${body.cancel_superseded ?? null}::boolean, cancel_superseded),
            requires_approval = coalesce(${body.requires_approval ?? null}::boolean, requires_approval)
          where id = ${row.id}`;
        // a new repository's heads are not the old one's: the next poll starts from what it finds
        if (body.repository !== undefined && body.repository !== row.repository) await tx`delete from project_polled_heads where project_id = ${row.id}`;
        const { content, scope } = projectEvent(row);
        emit('project.update', { ...content, repository: body.repository ?? row.repository, changes }, scope);
      });
      return byId(who, row.id);
    },

    async remove(who: Principal, org: string, name: string): Promise<string> {
      const { row, target } = await demandProject(sql, who, org, name, 'manageProject');
      demandNotStateManaged(row, target.label);
      // The project's webhooks go with it (cascade): instance webhooks receive project.delete.
      await events.transaction(async (tx, emit) => {
        await tx`delete from projects where id = ${row.id}`;
        const { content, scope } = projectEvent(row);
        emit('project.delete', content, scope);
      });
      return `project "${row.organization}/${row.name}" deleted`;
    },

    /** An inactive project is not evaluated (triggers are ignored); everything else stays. */
    async setActive(who: Principal, org: string, name: string, active: boolean): Promise<ProjectView> {
      const { row } = await demandProject(sql, who, org, name, 'manageProject');
      await events.transaction(async (tx, emit) => {
        await tx`update projects set active = ${active} where id = ${row.id}`;
        const { content, scope } = projectEvent(row);
        emit('project.update', { ...content, active, changes: ['active'] }, scope);
      });
      return byId(who, row.id);
    },

    /** Everything a project page shows, in one call. */
    async details(who: Principal, org: string, name: string): Promise<ProjectDetails> {
      const { row, access } = await demandProject(sql, who, org, name, 'viewProject');
      const [tasks, subscriptions, members] = await Promise.all([
        listTasks(sql, row.id, userIdOf(who)),
        listProjectSubscriptions(sql, row.id),
        listMembers(sql, 'project', row.id),
      ]);
      return { project: toProjectView(row, access), tasks, subscriptions, members };
    },

    async checkRepository(who: Principal, org: string, name: string): Promise<RepositoryCheck> {
      const { row } = await demandProject(sql, who, org, name, 'manageProject');
      return checkRepository(row.repository, await vetRepository(row.repository, repositoryPolicy()));
    },
  };
}
export type ProjectsService = ReturnType<typeof projectsService>;
