// Organizations: their views, events and use cases.
import { ApiError, type CreateOrganizationBody, type Permission, type Role, type UpdateOrganizationBody } from '../../protocol/index.js';
import { accessOf, demand, userIdOf, permissionList, type Access } from '../access/index.js';
import type { AccessDeps } from '../access/index.js';
import { demandCreationAllowed } from '../access/index.js';
import type { Principal } from '../access/index.js';
import { generateSshKeyPair } from './sshKeys.js';
import { demandOrganization, organizationTarget, type OrganizationRow } from '../access/index.js';
import { demandNotStateManaged } from '../access/index.js';

export interface OrganizationView {
  id: string;
  name: string;
  display_name: string;
  description: string;
  ssh_public_key: string;
  state_managed: boolean;
  created_at: Date;
  /** the caller's role and what it may do here */
  role: Role | null;
  permissions: Permission[];
}

export const toOrganizationView = (row: OrganizationRow, access: Access): OrganizationView => ({
  id: row.id, name: row.name, display_name: row.display_name, description: row.description,
  ssh_public_key: row.ssh_public_key, state_managed: row.state_managed, created_at: row.created_at,
  role: row.role, permissions: permissionList(access),
});

const isUniqueViolation = (e: unknown): boolean => typeof e === 'object' && e !== null && (e as { code?: string }).code === '23505';

/** organization.* content and scope: no project, so only instance webhooks receive them. */
export const organizationEvent = (row: { id: string; name: string }, changes?: string[]) => ({
  content: { organization: row.name, organization_id: row.id, ...(changes ? { changes } : {}) },
  scope: { organizationId: row.id },
});

export function organizationsService({ sql, config, secretBox, events }: AccessDeps) {
  async function getById(who: Principal, id: string): Promise<OrganizationView> {
    const [row] = await sql<OrganizationRow[]>`
      select o.id, o.name, o.display_name, o.description, o.ssh_public_key, o.state_managed, o.created_at, m.role
      from organizations o left join organization_members m on m.organization_id = o.id and m.user_id = ${userIdOf(who)}
      where o.id = ${id}`;
    if (!row) throw new ApiError('not_found', `no organization ${id}`);
    return toOrganizationView(row, demand(who, organizationTarget(row), 'viewOrg'));
  }

  return {
    /** The organizations the caller belongs to (a pinned key belongs to none). */
    async list(who: Principal): Promise<OrganizationView[]> {
      const rows = await sql<OrganizationRow[]>`
        select o.id, o.name, o.display_name, o.description, o.ssh_public_key, o.state_managed, o.created_at, m.role
        from organizations o join organization_members m on m.organization_id = o.id and m.user_id = ${userIdOf(who)}
        order by o.name`;
      return rows.flatMap((row) => {
        const access = accessOf(who, organizationTarget(row));
        return access.visible ? [toOrganizationView(row, access)] : [];
      });
    },

    /** permissions.createTeam decides who may; the creator becomes Admin. */
    async create(who: Principal, body: CreateOrganizationBody): Promise<OrganizationView> {
      const userId = userIdOf(who);
      demandCreationAllowed(who, config['permissions.createTeam'], 'organizations', 'permissions.createTeam');
      if (who.kind === 'user' && who.via === 'key') {
        if (who.projectId !== null || who.cacheId !== null) throw new ApiError('forbidden', 'a key pinned to a project or cache cannot create organizations');
        if (!who.permissions.has('manageOrg')) throw new ApiError('forbidden', 'manageOrg is required on the key to create an organization');
      }
      const keys = generateSshKeyPair(`kiln@${body.name}`);
      try {
        const row = await events.transaction(async (tx, emit) => {
          const [org] = await tx<{ id: string }[]>`
            insert into organizations (name, display_name, description, ssh_public_key, ssh_private_key, created_by)
            values (${body.name}, ${body.display_name ?? ''}, ${body.description ?? ''}, ${keys.publicKey},
                    ${secretBox.seal(Buffer.from(keys.privateKey))}, ${userId})
            returning id`;
          await tx`insert into organization_members (organization_id, user_id, role) values (${org!.id}, ${userId}, 'Admin')`;
          const { content, scope } = organizationEvent({ id: org!.id, name: body.name });
          emit('organization.create', content, scope);
          if (who.kind === 'user') emit('organization.member.create', { organization: body.name, user: who.username, role: 'Admin' }, scope);
          return org!;
        });
        return getById(who, row.id);
      } catch (e) {
        if (isUniqueViolation(e)) throw new ApiError('organization_exists', `an organization named "${body.name}" exists`);
        throw e;
      }
    },

    async get(who: Principal, name: string): Promise<OrganizationView> {
      const { row, access } = await demandOrganization(sql, who, name, 'viewOrg');
      return toOrganizationView(row, access);
    },

    getById,

    async update(who: Principal, name: string, body: UpdateOrganizationBody): Promise<OrganizationView> {
      const { row } = await demandOrganization(sql, who, name, 'manageOrg');
      demandNotStateManaged(row, `organization "${row.name}"`);
      const changes = Object.keys(body).filter((k) => body[k as keyof UpdateOrganizationBody] !== undefined);
      await events.transaction(async (tx, emit) => {
        await tx`
          update organizations set
            display_name = coalesce(${body.display_name ?? null}, display_name),
            description = coalesce(${body.description ?? null}, description)
          where id = ${row.id}`;
        const { content, scope } = organizationEvent(row, changes);
        emit('organization.update', content, scope);
      });
      return getById(who, row.id);
    },

    /** Deletes the organization with its projects, servers and subscriptions. */
    async remove(who: Principal, name: string): Promise<string> {
      const { row } = await demandOrganization(sql, who, name, 'manageOrg');
      demandNotStateManaged(row, `organization "${row.name}"`);
      await events.transaction(async (tx, emit) => {
        await tx`delete from organizations where id = ${row.id}`;
        const { content, scope } = organizationEvent(row);
        emit('organization.delete', content, scope);
      });
      return `organization "${row.name}" deleted`;
    },
  };
}
export type OrganizationsService = ReturnType<typeof organizationsService>;
