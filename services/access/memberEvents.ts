// organization.member.*, project.member.* and cache.member.* (and the invitations to projects and
// caches): one content shape per scope, emitted in the transaction that changes the membership.
import type { Role } from '../../protocol/index.js';
import type { Emit } from '../../storage/index.js';

export type MemberPlace =
  | { scope: 'organization'; id: string; name: string }
  | { scope: 'project'; id: string; organizationId: string; label: string }
  | { scope: 'cache'; id: string; name: string };

export type MemberChange = 'create' | 'update' | 'delete';

export function emitMemberEvent(emit: Emit, place: MemberPlace, change: MemberChange, user: string, role?: Role): void {
  const withRole = role ? { role } : {};
  switch (place.scope) {
    case 'organization':
      emit(`organization.member.${change}`, { organization: place.name, user, ...withRole }, { organizationId: place.id });
      return;
    case 'project':
      emit(`project.member.${change}`, { project: place.label, user, ...withRole }, { organizationId: place.organizationId, projectId: place.id });
      return;
    case 'cache':
      emit(`cache.member.${change}`, { cache: place.name, user, ...withRole }, { cacheId: place.id });
  }
}

/** project.invitation.create or cache.invitation.create; organizations have no invitations. */
export function emitInvitationEvent(emit: Emit, place: Exclude<MemberPlace, { scope: 'organization' }>, user: string, role: Role, inviter: string | null): void {
  const extra = { role, ...(inviter ? { inviter } : {}) };
  if (place.scope === 'project') {
    emit('project.invitation.create', { project: place.label, user, ...extra }, { organizationId: place.organizationId, projectId: place.id });
  } else {
    emit('cache.invitation.create', { cache: place.name, user, ...extra }, { cacheId: place.id });
  }
}
