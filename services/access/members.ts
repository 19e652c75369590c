// Members of projects and caches: /projects/{project}/users and /caches/{cache}/users. New
// members come by invitation (invitations.ts); this file lists them, changes a role and removes
// one. A member may always leave. State-managed projects and caches refuse every change.
import type { MemberBody, RemoveMemberBody } from '../../protocol/index.js';
import type { AccessDeps } from './accessDeps.js';
import { changeMemberRole, deleteMember, findUserId, listMembers, type MemberView } from './memberships.js';
import { emitMemberEvent, type MemberPlace } from './memberEvents.js';
import type { Principal } from './principal.js';
import { demandNotStateManaged } from './stateManaged.js';
import { demandCache, demandProjectRef, type Found } from './targets.js';

type Scope = 'project' | 'cache';
const managePermission = { project: 'manageMembers', cache: 'manageCacheMembers' } as const;
const viewPermission = { project: 'viewProject', cache: 'viewCache' } as const;

export function membersService({ sql, events }: AccessDeps) {
  async function find(who: Principal, scope: Scope, ref: string, permission: (typeof managePermission)[Scope] | (typeof viewPermission)[Scope]): Promise<Found<{ id: string; state_managed: boolean }> & { place: MemberPlace }> {
    if (scope === 'project') {
      const found = await demandProjectRef(sql, who, ref, permission);
      const { row } = found;
      return { ...found, place: { scope, id: row.id, organizationId: row.organization_id, label: `${row.organization}/${row.name}` } };
    }
    const found = await demandCache(sql, who, ref, permission);
    return { ...found, place: { scope, id: found.row.id, name: found.row.name } };
  }

  const isSelf = (who: Principal, username: string) => who.kind === 'user' && who.username.toLowerCase() === username.toLowerCase();

  return {
    async list(who: Principal, scope: Scope, ref: string): Promise<MemberView[]> {
      const { row } = await find(who, scope, ref, viewPermission[scope]);
      return listMembers(sql, scope, row.id);
    },

    async update(who: Principal, scope: Scope, ref: string, body: MemberBody): Promise<MemberView[]> {
      const { row, target, place } = await find(who, scope, ref, managePermission[scope]);
      demandNotStateManaged(row, target.label);
      const userId = await findUserId(sql, body.user);
      await events.transaction(async (tx, emit) => {
        await changeMemberRole(tx, scope, row.id, userId, body.role, target.label);
        emitMemberEvent(emit, place, 'update', body.user, body.role);
      });
      return listMembers(sql, scope, row.id);
    },

    async remove(who: Principal, scope: Scope, ref: string, body: RemoveMemberBody): Promise<MemberView[]> {
      const leaving = isSelf(who, body.user);
      const { row, target, place } = await find(who, scope, ref, leaving ? viewPermission[scope] : managePermission[scope]);
      demandNotStateManaged(row, target.label);
      const userId = await findUserId(sql, body.user);
      await events.transaction(async (tx, emit) => {
        await deleteMember(tx, scope, row.id, userId, target.label);
        emitMemberEvent(emit, place, 'delete', body.user);
      });
      return leaving ? [] : listMembers(sql, scope, row.id);
    },
  };
}
export type MembersService = ReturnType<typeof membersService>;
