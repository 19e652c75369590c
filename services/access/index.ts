// The public face of services/access/: what other domains and folders import from it.
export { type KeyUser, type Principal, anonymous, isSuperuser, superuserRefusal, type SessionUser, type Anonymous } from './principal.js';
export { requireSession, requireUser } from './principalGuards.js';
export { accessOf, notFound, forbidden, permissionList, userIdOf, type Access, demand, type AccessTarget } from './access.js';
export { cacheTarget, findCache, demandProject, demandProjectRef, isUuid, demandCache, findCacheById, userOf, type ProjectRow, demandOrganization, organizationTarget, type OrganizationRow, findOrganization, findProjectById, listProjectsOfOrganization, projectTarget, type CacheRow } from './targets.js';
export { demandAllowedDestination } from './outboundDestination.js';
export { demandCreationAllowed } from './creationPolicy.js';
export { findUserId, changeMemberRole, deleteMember, insertMember, listMembers, type MemberView } from './memberships.js';
export type { AccessDeps } from './accessDeps.js';
export { emitMemberEvent, type MemberPlace } from './memberEvents.js';
export { invitationsService } from './invitations.js';
export { membersService } from './members.js';
export { rolePermissions, permissionsOfRole, type Scope } from './roles.js';
export { demandNotStateManaged } from './stateManaged.js';
