// Project bodies, names and views: the reserved path words, repository URLs, create and update bodies, what the API answers.
import { z } from 'zod';
import { ResourceName } from './names.js';
import { MemberView } from './organizations.js';
import { Permission, Role } from './permissions.js';
import { SubscriptionsView } from './subscriptions.js';
import { TaskView } from './tasks.js';

// Second path segments of the single-segment project routes (/projects/{project}/users, …).
// A project with one of these names could not be told apart from them, so they are refused.
export const reservedProjectNames = ['users', 'subscribe', 'workers', 'webhooks', 'invitations'] as const;

export const ProjectName = ResourceName.refine((n) => !(reservedProjectNames as readonly string[]).includes(n.toLowerCase()), {
  message: `is reserved (${reservedProjectNames.join(', ')} are path words)`,
});

/** A git URL git ls-remote accepts; never an option (a leading "-") and never the ext:: transport. */
export const RepositoryUrl = z
  .string()
  .min(1)
  .max(2000)
  .refine((s) => !s.startsWith('-'), { message: 'must not start with "-"' })
  .refine((s) => !/^ext::/i.test(s), { message: 'the ext:: transport is not allowed' })
  .refine((s) => !/[\s\0]/.test(s), { message: 'must not contain whitespace' });

const Wildcard = z.string().min(1).max(1000);
const PollInterval = z.number().int().min(1).max(86_400);
const Branch = z.string().min(1).max(255).regex(/^[^\s~^:?*[\\]+$/, 'is not a valid branch name');

export const CreateProjectBody = z.strictObject({
  name: ProjectName,
  repository: RepositoryUrl,
  display_name: z.string().max(200).optional(),
  description: z.string().max(2000).optional(),
  wildcard: Wildcard.optional(),
  default_branch: Branch.optional(),
  /** poll the repository every this many seconds (kiln extension; at least projects.minPollIntervalSecs); absent or null: no polling */
  poll_interval_secs: PollInterval.nullable().optional(),
  /** a newer commit of a branch or pull request aborts the open evaluations of the older one (kiln extension; default true) */
  cancel_superseded: z.boolean().optional(),
  /** pull requests from forks wait for approval in every task (kiln extension; default false) */
  requires_approval: z.boolean().optional(),
});
export type CreateProjectBody = z.infer<typeof CreateProjectBody>;

export const UpdateProjectBody = z.strictObject({
  repository: RepositoryUrl.optional(),
  display_name: z.string().max(200).optional(),
  description: z.string().max(2000).optional(),
  wildcard: Wildcard.optional(),
  default_branch: Branch.nullable().optional(),
  poll_interval_secs: PollInterval.nullable().optional(),
  cancel_superseded: z.boolean().optional(),
  requires_approval: z.boolean().optional(),
});
export type UpdateProjectBody = z.infer<typeof UpdateProjectBody>;

const Timestamp = z.iso.datetime({ offset: true });

/** A project as GET/PUT/PATCH /projects/{org}… answer it, for the caller asking. */
export const ProjectView = z.strictObject({
  id: z.uuid(),
  organization: ResourceName,
  name: ResourceName,
  display_name: z.string(),
  description: z.string(),
  repository: z.string(),
  wildcard: z.string(),
  default_branch: z.string().nullable(),
  /** seconds between polls of the repository; null: not polled */
  poll_interval_secs: z.number().int().nullable(),
  /** a newer commit of a branch or pull request aborts the open evaluations of the older one */
  cancel_superseded: z.boolean(),
  /** pull requests from forks wait for approval in every task of the project */
  requires_approval: z.boolean(),
  active: z.boolean(),
  state_managed: z.boolean(),
  created_at: Timestamp,
  /** the caller's role and what it may do here */
  role: Role.nullable(),
  permissions: z.array(Permission),
});
export type ProjectView = z.infer<typeof ProjectView>;

/** GET /projects/{org}/{project}/details: what a project page shows, in one call. */
export const ProjectDetails = z.strictObject({
  project: ProjectView,
  tasks: z.array(TaskView),
  subscriptions: SubscriptionsView,
  members: z.array(MemberView),
});
export type ProjectDetails = z.infer<typeof ProjectDetails>;

/** POST /projects/{org}/{project}/check-repository: the refs git ls-remote saw, or why it could not. */
export const RepositoryCheck = z.union([
  z.strictObject({ ok: z.literal(true), refs: z.array(z.strictObject({ name: z.string(), commit: z.string() })), truncated: z.boolean() }),
  z.strictObject({ ok: z.literal(false), reason: z.string() }),
]);
export type RepositoryCheck = z.infer<typeof RepositoryCheck>;
