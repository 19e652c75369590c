// /orgs/{org}/users. Organizations have no invitations (the spec invites to projects and caches):
// an Admin adds members directly. A member may always leave; the last Admin may not.
import type { MemberBody, RemoveMemberBody } from '../../protocol/index.js';
import type { AccessDeps } from '../access/index.js';
import { changeMemberRole, deleteMember, findUserId, insertMember, listMembers, type MemberView } from '../access/index.js';
import { emitMemberEvent, type MemberPlace } from '../access/index.js';
import type { Principal } from '../access/index.js';
import { demandNotStateManaged } from '../access/index.js';
import { demandOrganization } from '../access/index.js';

export function organizationMembersService({ sql, events }: AccessDeps) {
  const place = (row: { id: string; name: string }): MemberPlace => ({ scope: 'organization', id: row.id, name: row.name });

  return {
    async list(who: Principal, org: string): Promise<MemberView[]> {
      const { row } = await demandOrganization(sql, who, org, 'viewOrg');
      return listMembers(sql, 'organization', row.id);
    },

    async add(who: Principal, org: string, body: MemberBody): Promise<MemberView[]> {
      const { row, target } = await demandOrganization(sql, who, org, 'manageOrgMembers');
      demandNotStateManaged(row, target.label);
      const userId = await findUserId(sql, body.user);
      await events.transaction(async (tx, emit) => {
        await insertMember(tx, 'organization', row.id, userId, body.role, target.label);
        emitMemberEvent(emit, place(row), 'create', body.user, body.role);
      });
      return listMembers(sql, 'organization', row.id);
    },

    async update(who: Principal, org: string, body: MemberBody): Promise<MemberView[]> {
      const { row, target } = await demandOrganization(sql, who, org, 'manageOrgMembers');
      demandNotStateManaged(row, target.label);
      const userId = await findUserId(sql, body.user);
      await events.transaction(async (tx, emit) => {
        await changeMemberRole(tx, 'organization', row.id, userId, body.role, target.label);
        emitMemberEvent(emit, place(row), 'update', body.user, body.role);
      });
      return listMembers(sql, 'organization', row.id);
    },

    async remove(who: Principal, org: string, body: RemoveMemberBody): Promise<MemberView[]> {
      const leaving = who.kind === 'user' && who.username.toLowerCase() === body.user.toLowerCase();
      const { row, target } = await demandOrganization(sql, who, org, leaving ? 'viewOrg' : 'manageOrgMembers');
      demandNotStateManaged(row, target.label);
      const userId = await findUserId(sql, body.user);
      await events.transaction(async (tx, emit) => {
        await deleteMember(tx, 'organization', row.id, userId, target.label);
        emitMemberEvent(emit, place(row), 'delete', body.user);
      });
      return leaving ? [] : listMembers(sql, 'organization', row.id);
    },
  };
}
export type OrganizationMembersService = ReturnType<typeof organizationMembersService>;
