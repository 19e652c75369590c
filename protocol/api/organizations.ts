// Request bodies of organization routes.
import { z } from 'zod';
import { ResourceName, Username } from './names.js';
import { Role } from './permissions.js';

export const CreateOrganizationBody = z.strictObject({
  name: ResourceName,
  display_name: z.string().max(200).optional(),
  description: z.string().max(2000).optional(),
});
export type CreateOrganizationBody = z.infer<typeof CreateOrganizationBody>;

export const UpdateOrganizationBody = z.strictObject({
  display_name: z.string().max(200).optional(),
  description: z.string().max(2000).optional(),
});
export type UpdateOrganizationBody = z.infer<typeof UpdateOrganizationBody>;

/** POST and PATCH on a member list (organizations, projects, caches): who, with which role. */
export const MemberBody = z.strictObject({ user: Username, role: Role });
export type MemberBody = z.infer<typeof MemberBody>;

/** DELETE on a member list: who leaves. */
export const RemoveMemberBody = z.strictObject({ user: Username });
export type RemoveMemberBody = z.infer<typeof RemoveMemberBody>;
