// The built-in roles. A role is held on an organization, a project or a cache, and means a set
// of that scope's permissions. docs/permissions.md is the prose of this table; keep them together.
import type { Permission, Role } from '../../protocol/index.js';

export type Scope = 'organization' | 'project' | 'cache';

const organizationView: Permission[] = ['viewOrg'];
const organizationWrite: Permission[] = [...organizationView, 'createProject'];
const organizationAdmin: Permission[] = [...organizationWrite, 'manageOrg', 'manageOrgMembers', 'manageServers', 'manageSubscriptions'];

const projectView: Permission[] = ['viewProject'];
const projectWrite: Permission[] = [...projectView, 'triggerEvaluation', 'manageTasks'];
const projectAdmin: Permission[] = [
  ...projectWrite, 'manageProject', 'manageMembers', 'manageSubscriptions', 'manageWebhooks', 'manageWorkers',
];

const cacheView: Permission[] = ['viewCache'];
const cacheWrite: Permission[] = [...cacheView, 'writeStore'];
const cacheAdmin: Permission[] = [...cacheWrite, 'manageCache', 'manageCacheMembers', 'manageCacheSubscriptions', 'manageCacheWebhooks'];

export const rolePermissions: Readonly<Record<Scope, Readonly<Record<Role, ReadonlySet<Permission>>>>> = {
  organization: { View: new Set(organizationView), Write: new Set(organizationWrite), Admin: new Set(organizationAdmin) },
  project: { View: new Set(projectView), Write: new Set(projectWrite), Admin: new Set(projectAdmin) },
  cache: { View: new Set(cacheView), Write: new Set(cacheWrite), Admin: new Set(cacheAdmin) },
};

/** The permission that makes a thing of a scope visible at all; without it the thing is a 404. */
export const viewPermission: Readonly<Record<Scope, Permission>> = {
  organization: 'viewOrg',
  project: 'viewProject',
  cache: 'viewCache',
};

const none: ReadonlySet<Permission> = new Set();

export function permissionsOfRole(scope: Scope, role: Role | null): ReadonlySet<Permission> {
  return role ? rolePermissions[scope][role] : none;
}
