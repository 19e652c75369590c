// The permission and role names that API keys, members and services speak in.
import { z } from 'zod';

// Permission names. The spec's nine (Authentication rule 8) plus the view/manage ones kiln
// needs; docs/permissions.md says what each allows and which built-in role holds it.
export const permissionNames = [
  // spec
  'viewProject', 'triggerEvaluation', 'manageMembers', 'manageCacheMembers', 'manageSubscriptions',
  'manageCacheSubscriptions', 'manageWebhooks', 'manageCacheWebhooks', 'writeStore',
  // kiln
  'viewOrg', 'manageOrg', 'manageOrgMembers', 'manageServers', 'createProject', 'manageProject',
  'manageTasks', 'manageWorkers', 'viewCache', 'manageCache',
  // instance: a superuser's key uses superuser powers only with it (services/access/principal.ts)
  'admin',
] as const;

export const Permission = z.enum(permissionNames);
export type Permission = z.infer<typeof Permission>;

export const roleNames = ['Admin', 'Write', 'View'] as const;
export const Role = z.enum(roleNames);
export type Role = z.infer<typeof Role>;
