// The public face of services/access/: what other domains and folders import from it.
export { type Access, accessOf, demand, forbidden, notFound, permissionList, userIdOf } from './access.js';
export type { AccessDeps } from './accessDeps.js';
export { demandCreationAllowed } from './creationPolicy.js';
export { invitationsService } from './invitations.js';
export { emitMemberEvent, type MemberPlace } from './memberEvents.js';
export { membersService } from './members.js';
export { changeMemberRole, deleteMember, findUserId, insertMember, listMembers, type MemberView } from './memberships.js';
export { demandAllowedDestination } from './outboundDestination.js';
export { anonymous, isSuperuser, type KeyUser, type Principal, type SessionUser, superuserRefusal } from './principal.js';
export { requireSession, requireUser } from './principalGuards.js';
export { demandNotStateManaged } from './stateManaged.js';
export { cacheTarget, demandCache, demandOrganization, demandProject, demandProjectRef, findCache, findCacheById, findOrganization, findProjectById, isUuid, listProjectsOfOrganization, type OrganizationRow, organizationTarget, type ProjectRow, projectTarget, userOf } from './targets.js';
