// Build servers of an organization (/servers/{org}…), reached over SSH with the organization's
// key. Members see them (viewOrg); Admins change them (manageServers).
import { ApiError, type CreateServerBody, type UpdateServerBody } from '../../protocol/index.js';
import type { AccessDeps } from '../access/index.js';
import { organizationSshKeyService } from './organizationSshKey.js';
import type { Principal } from '../access/index.js';
import { checkSshConnection, type ConnectionCheck } from './sshConnection.js';
import { demandOrganization } from '../access/index.js';

export interface ServerView {
  id: string;
  organization: string;
  name: string;
  host: string;
  port: number;
  username: string;
  architectures: string[];
  features: string[];
  max_jobs: number;
  active: boolean;
  created_at: Date;
}

const isUniqueViolation = (e: unknown): boolean => typeof e === 'object' && e !== null && (e as { code?: string }).code === '23505';

export function serversService(deps: AccessDeps) {
  const { sql } = deps;
  const sshKeys = organizationSshKeyService(deps);

  const rows = (organizationId: string, name?: string) => sql<ServerView[]>`
    select s.id, o.name as organization, s.name, s.host, s.port, s.username, s.architectures, s.features, s.max_jobs, s.active, s.created_at
    from servers s join organizations o on o.id = s.organization_id
    where s.organization_id = ${organizationId} ${name === undefined ? sql`` : sql`and s.name = ${name}`}
    order by s.name`;

  async function server(who: Principal, org: string, name: string, permission: 'viewOrg' | 'manageServers') {
    const { row: organization } = await demandOrganization(sql, who, org, permission);
    const [found] = await rows(organization.id, name);
    if (!found) throw new ApiError('not_found', `no server "${name}" in organization "${organization.name}"`);
    return { organization, server: found };
  }

  return {
    async list(who: Principal, org: string): Promise<ServerView[]> {
      const { row } = await demandOrganization(sql, who, org, 'viewOrg');
      return rows(row.id);
    },

    async create(who: Principal, org: string, body: CreateServerBody): Promise<ServerView> {
      const { row } = await demandOrganization(sql, who, org, 'manageServers');
      try {
        await sql`
          insert into servers (organization_id, name, host, port, username, architectures, features, max_jobs)
          values (${row.id}, ${body.name}, ${body.host}, ${body.port ?? 22}, ${body.username ?? 'root'},
                  ${body.architectures ?? []}, ${body.features ?? []}, ${body.max_jobs ?? 1})`;
      } catch (e) {
        if (isUniqueViolation(e)) throw new ApiError('server_exists', `organization "${row.name}" has a server "${body.name}"`);
        throw e;
      }
      return (await rows(row.id, body.name))[0]!;
    },

    async get(who: Principal, org: string, name: string): Promise<ServerView> {
      return (await server(who, org, name, 'viewOrg')).server;
    },

    async update(who: Principal, org: string, name: string, body: UpdateServerBody): Promise<ServerView> {
      const { organization, server: s } = await server(who, org, name, 'manageServers');
      await sql`
        update servers set
          host = ${body.host ?? s.host}, port = ${body.port ?? s.port}, username = ${body.username ?? s.username},
          architectures = ${body.architectures ?? s.architectures}, features = ${body.features ?? s.features},
          max_jobs = ${body.max_jobs ?? s.max_jobs}
        where id = ${s.id}`;
      return (await rows(organization.id, s.name))[0]!;
    },

    async remove(who: Principal, org: string, name: string): Promise<string> {
      const { server: s } = await server(who, org, name, 'manageServers');
      await sql`delete from servers where id = ${s.id}`;
      return `server "${s.name}" deleted`;
    },

    async setActive(who: Principal, org: string, name: string, active: boolean): Promise<ServerView> {
      const { organization, server: s } = await server(who, org, name, 'manageServers');
      await sql`update servers set active = ${active} where id = ${s.id}`;
      return (await rows(organization.id, s.name))[0]!;
    },

    async checkConnection(who: Principal, org: string, name: string): Promise<ConnectionCheck> {
      const { organization, server: s } = await server(who, org, name, 'manageServers');
      return checkSshConnection({ host: s.host, port: s.port, username: s.username, privateKey: await sshKeys.privateKey(organization.id) });
    },
  };
}
export type ServersService = ReturnType<typeof serversService>;
