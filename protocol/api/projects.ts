// Project bodies and names: the reserved path words, repository URLs, create and update bodies.
import { z } from 'zod';
import { ResourceName } from './names.js';

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
const Branch = z.string().min(1).max(255).regex(/^[^\s~^:?*[\\]+$/, 'is not a valid branch name');

export const CreateProjectBody = z.strictObject({
  name: ProjectName,
  repository: RepositoryUrl,
  display_name: z.string().max(200).optional(),
  description: z.string().max(2000).optional(),
  wildcard: Wildcard.optional(),
  default_branch: Branch.optional(),
});
export type CreateProjectBody = z.infer<typeof CreateProjectBody>;

export const UpdateProjectBody = z.strictObject({
  repository: RepositoryUrl.optional(),
  display_name: z.string().max(200).optional(),
  description: z.string().max(2000).optional(),
  wildcard: Wildcard.optional(),
  default_branch: Branch.nullable().optional(),
});
export type UpdateProjectBody = z.infer<typeof UpdateProjectBody>;
