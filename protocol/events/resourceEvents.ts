// Organizations, projects and tasks: durable. Project and task events reach the project's webhooks;
// organization events have no project, so only instance webhooks receive them.
import { z } from 'zod';
import { CacheLabel, Count, ProjectLabel, TaskName, Username, Uuid, durableEvent } from './eventFields.js';

const Role = z.enum(['Admin', 'Write', 'View']);
/** the names of the fields a change touched (never their secret values) */
const Changes = z.array(z.string().max(64)).max(64);
const SubscriptionMode = z.number().int().min(0).max(2);

const Organization = z.looseObject({ organization: z.string().max(63), organization_id: Uuid, changes: Changes.optional() });
const OrganizationMember = z.looseObject({ organization: z.string().max(63), user: Username, role: Role.optional() });
const OrganizationSubscription = z.looseObject({ organization: z.string().max(63), cache: CacheLabel, mode: SubscriptionMode.optional() });

const Project = z.looseObject({
  project: ProjectLabel,
  project_id: Uuid,
  repository: z.string().max(2000).optional(),
  active: z.boolean().optional(),
  changes: Changes.optional(),
});
const ProjectMember = z.looseObject({ project: ProjectLabel, user: Username, role: Role.optional() });
const ProjectSubscription = z.looseObject({ project: ProjectLabel, cache: CacheLabel, mode: SubscriptionMode.optional() });

const Task = z.looseObject({ project: ProjectLabel, task: TaskName, task_id: Uuid, changes: Changes.optional() });
const TaskStar = z.looseObject({ project: ProjectLabel, task: TaskName, user: Username, stars: Count.optional() });

export const TaskActionKind = z.enum(['send_web_request', 'send_mail', 'open_pr']);
const TaskAction = z.looseObject({
  project: ProjectLabel,
  task: TaskName,
  action_id: Uuid,
  action: z.string().max(100),
  kind: TaskActionKind,
  changes: Changes.optional(),
});
export const TaskActionUpdateContent = z.looseObject({
  project: ProjectLabel,
  task: TaskName,
  action_id: Uuid,
  action: z.string().max(100),
  kind: TaskActionKind,
  /** the action's delivery of one event: delivered, retrying (an attempt failed) or dead */
  status: z.enum(['delivered', 'retrying', 'dead']),
  delivery_id: Uuid,
  /** the event the action was run for */
  event: z.string().max(200),
  attempt: Count,
  error: z.string().max(2000).optional(),
  /** open_pr (docs/git-hosts.md): delivery_id is the run's id, event evaluation.completed; the evaluation and what the run did */
  evaluation_id: Uuid.optional(),
  outcome: z.enum(['opened', 'updated', 'unchanged', 'failed']).optional(),
  pull_request: z.int().positive().optional(),
  pull_request_url: z.string().max(2000).optional(),
  pushed: z.string().regex(/^([0-9a-f]{40}|[0-9a-f]{64})$/).optional(),
});

export const resourceEventDefinitions = {
  'organization.create': durableEvent('organization', 'an organization was created', Organization),
  'organization.update': durableEvent('organization', 'an organization\'s settings changed', Organization),
  'organization.delete': durableEvent('organization', 'an organization was deleted', Organization),
  'organization.ssh_key.rotate': durableEvent('organization', 'an organization\'s SSH key was regenerated', Organization),
  'organization.member.create': durableEvent('organization', 'a member joined an organization', OrganizationMember),
  'organization.member.update': durableEvent('organization', 'an organization member\'s role changed', OrganizationMember),
  'organization.member.delete': durableEvent('organization', 'a member left an organization', OrganizationMember),
  'organization.subscription.create': durableEvent('organization', 'an organization subscribed to a cache (for all its projects)', OrganizationSubscription),
  'organization.subscription.delete': durableEvent('organization', 'an organization unsubscribed from a cache, or cancelled its request (request: true)', OrganizationSubscription),
  'organization.subscription.request': durableEvent('organization', 'an organization asked to subscribe to a cache', OrganizationSubscription),

  'project.create': durableEvent('project', 'a project was created', Project),
  'project.update': durableEvent('project', 'a project\'s settings or active flag changed', Project),
  'project.delete': durableEvent('project', 'a project was deleted', Project),
  'project.member.create': durableEvent('project', 'a member joined a project', ProjectMember),
  'project.member.update': durableEvent('project', 'a project member\'s role changed', ProjectMember),
  'project.member.delete': durableEvent('project', 'a member left a project', ProjectMember),
  'project.invitation.create': durableEvent('project', 'a user was invited to a project', ProjectMember),
  'project.subscription.create': durableEvent('project', 'a project subscribed to a cache', ProjectSubscription),
  'project.subscription.delete': durableEvent('project', 'a project unsubscribed from a cache, or cancelled its request (request: true)', ProjectSubscription),
  'project.subscription.request': durableEvent('project', 'a project asked to subscribe to a cache', ProjectSubscription),
  'project.worker.register': durableEvent('project', 'a worker peer token was registered for a project', z.looseObject({ project: ProjectLabel, worker: Uuid.nullable().optional(), name: z.string().max(100).optional() })),

  'task.create': durableEvent('task', 'a task was created', Task),
  'task.update': durableEvent('task', 'a task\'s settings changed', Task),
  'task.delete': durableEvent('task', 'a task was deleted', Task),
  'task.star': durableEvent('task', 'a user starred a task', TaskStar),
  'task.unstar': durableEvent('task', 'a user removed their star from a task', TaskStar),
  'task.action.create': durableEvent('task', 'an action was added to a task', TaskAction),
  'task.action.edit': durableEvent('task', 'a task action\'s settings changed', TaskAction),
  'task.action.delete': durableEvent('task', 'an action was removed from a task', TaskAction),
  'task.action.update': durableEvent('task', 'a task action ran for an event: delivered, retrying or dead; never delivered to task actions themselves', TaskActionUpdateContent),
};
