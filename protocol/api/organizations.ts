// Request bodies and views of organization routes.
import { z } from 'zod';
import { ResourceName, Username } from './names.js';
import { Permission, Role } from './permissions.js';

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

const Timestamp = z.iso.datetime({ offset: true });

/** An organization as GET/PUT/PATCH /orgs… answer it, for the caller asking. */
export const OrganizationView = z.strictObject({
  id: z.uuid(),
  name: ResourceName,
  display_name: z.string(),
  description: z.string(),
  /** the key kiln uses to reach the organization's build servers */
  ssh_public_key: z.string(),
  state_managed: z.boolean(),
  created_at: Timestamp,
  /** the caller's role and what it may do here */
  role: Role.nullable(),
  permissions: z.array(Permission),
});
export type OrganizationView = z.infer<typeof OrganizationView>;

/** One member of an organization, project or cache (GET …/users; POST/PATCH/DELETE answer the list). */
export const MemberView = z.strictObject({
  user: Username,
  /** the display name */
  name: z.string(),
  role: Role,
  created_at: Timestamp,
});
export type MemberView = z.infer<typeof MemberView>;

/** GET and POST /orgs/{org}/ssh. */
export const SshKeyView = z.strictObject({ public_key: z.string() });
export type SshKeyView = z.infer<typeof SshKeyView>;
