// Build servers of an organization (/servers/{org}…), reached over SSH with the organization's
// key. Members see them (viewOrg); Admins change them (manageServers).
import { ApiError, type CreateServerBody, type UpdateServerBody } from '../../protocol/index.js';
import type { AccessDeps } from '../access/index.js';
import { organizationSshKeyService } from './organizationSshKey.js';
import type { Principal } from '../access/index.js';
import { checkSshConnection, hostKeyLineFingerprint, type ConnectionCheck } from './sshConnection.js';
import { buildServerTargets, type BuildServerTarget } from './buildServerTargets.js';
import { demandAllowedDestination, demandOrganization } from '../access/index.js';
import { createOutboundClient } from '../../storage/index.js';

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
  /** the pinned host key's fingerprint; null until a check-connection succeeds */
  host_key_fingerprint: string | null;
  host_key_pinned_at: Date | null;
  created_at: Date;
}

/** check-connection's answer: whether the key shown differs from the one pinned before. */
export type ServerConnectionCheck = ConnectionCheck & { host_key_changed: boolean };

const isUniqueViolation = (e: unknown): boolean => typeof e === 'object' && e !== null && (e as { code?: string }).code === '23505';

export function serversService(deps: AccessDeps) {
  const { sql } = deps;
  const sshKeys = organizationSshKeyService(deps);
  // kiln connects to a server's address as to a webhook's: only within outbound.allowedNetworks.
  // ssh is handed the address checked, not the name, so a name that resolves elsewhere when it
  // connects (DNS rebinding) is never reached.
  const outbound = createOutboundClient({ allowedNetworks: deps.config['outbound.allowedNetworks'], ...(deps.resolve ? { resolve: deps.resolve } : {}) });
  const addressOf = (host: string, port: number) => `ssh://${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${port}`;

  const rows = async (organizationId: string, name?: string): Promise<(ServerView & { host_key: string | null })[]> => {
    const found = await sql<(Omit<ServerView, 'host_key_fingerprint'> & { host_key: string | null })[]>`
      select s.id, o.name as organization, s.name, s.host, s.port, s.username, s.architectures, s.features, s.max_jobs, s.active,
             s.host_key, s.host_key_pinned_at, s.created_at
      from servers s join organizations o on o.id = s.organization_id
      where s.organization_id = ${organizationId} ${name === undefined ? sql`` : sql`and s.name = ${name}`}
      order by s.name`;
    return found.map((r) => ({ ...r, host_key_fingerprint: r.host_key === null ? null : hostKeyLineFingerprint(r.host_key) }));
  };
  const view = ({ host_key: _pinned, ...rest }: ServerView & { host_key: string | null }): ServerView => rest;

  async function server(who: Principal, org: string, name: string, permission: 'viewOrg' | 'manageServers') {
    const { row: organization } = await demandOrganization(sql, who, org, permission);
    const [found] = await rows(organization.id, name);
    if (!found) throw new ApiError('not_found', `no server "${name}" in organization "${organization.name}"`);
    return { organization, server: found };
  }

  return {
    async list(who: Principal, org: string): Promise<ServerView[]> {
      const { row } = await demandOrganization(sql, who, org, 'viewOrg');
      return (await rows(row.id)).map(view);
    },

    async create(who: Principal, org: string, body: CreateServerBody): Promise<ServerView> {
      const { row } = await demandOrganization(sql, who, org, 'manageServers');
      await demandAllowedDestination(outbound, 'host', addressOf(body.host, body.port ?? 22));
      try {
        await sql`
          insert into servers (organization_id, name, host, port, username, architectures, features, max_jobs)
          values (${row.id}, ${body.name}, ${body.host}, ${body.port ?? 22}, ${body.username ?? 'root'},
                  ${body.architectures ?? []}, ${body.features ?? []}, ${body.max_jobs ?? 1})`;
      } catch (e) {
        if (isUniqueViolation(e)) throw new ApiError('server_exists', `organization "${row.name}" has a server "${body.name}"`);
        throw e;
      }
      return view((await rows(row.id, body.name))[0]!);
    },

    async get(who: Principal, org: string, name: string): Promise<ServerView> {
      return view((await server(who, org, name, 'viewOrg')).server);
    },

    async update(who: Principal, org: string, name: string, body: UpdateServerBody): Promise<ServerView> {
      const { organization, server: s } = await server(who, org, name, 'manageServers');
      // Another address is another machine: its key is unknown until it is checked.
      const moved = (body.host ?? s.host) !== s.host || (body.port ?? s.port) !== s.port;
      if (moved) await demandAllowedDestination(outbound, 'host', addressOf(body.host ?? s.host, body.port ?? s.port));
      await sql`
        update servers set
          host = ${body.host ?? s.host}, port = ${body.port ?? s.port}, username = ${body.username ?? s.username},
          architectures = ${body.architectures ?? s.architectures}, features = ${body.features ?? s.features},
          max_jobs = ${body.max_jobs ?? s.max_jobs}
          ${moved ? sql`, host_key = null, host_key_pinned_at = null` : sql``}
        where id = ${s.id}`;
      return view((await rows(organization.id, s.name))[0]!);
    },

    async remove(who: Principal, org: string, name: string): Promise<string> {
      const { server: s } = await server(who, org, name, 'manageServers');
      await sql`delete from servers where id = ${s.id}`;
      return `server "${s.name}" deleted`;
    },

    async setActive(who: Principal, org: string, name: string, active: boolean): Promise<ServerView> {
      const { organization, server: s } = await server(who, org, name, 'manageServers');
      await sql`update servers set active = ${active} where id = ${s.id}`;
      return view((await rows(organization.id, s.name))[0]!);
    },

    /**
     * Logs in with the organization's key. A login that works pins the key the server showed
     * (docs/builds.md, "Build servers"): the first check pins it, a later one accepts a changed key.
     */
    async checkConnection(who: Principal, org: string, name: string): Promise<ServerConnectionCheck> {
      const { organization, server: s } = await server(who, org, name, 'manageServers');
      const reachable = await outbound.connectableAddresses(s.host);
      if ('refusal' in reachable) return { ok: false, host_key_fingerprint: null, reason: `kiln does not connect there: ${reachable.refusal}`, host_key_changed: false };
      const { hostKey, system, features, ...check } = await checkSshConnection({ host: reachable.addresses[0]!, port: s.port, username: s.username, privateKey: await sshKeys.privateKey(organization.id) });
      const changed = s.host_key !== null && hostKey !== null && hostKey !== s.host_key;
      if (check.ok && hostKey !== null) {
        // Only while the address is the one checked: a PATCH in between is another machine.
        await sql`
          update servers set host_key = ${hostKey}, host_key_pinned_at = now()
          where id = ${s.id} and host = ${s.host} and port = ${s.port} and host_key is distinct from ${hostKey}`;
      }
      // A server added without systems builds for the one its Nix reports (docs/builds.md, "Build servers").
      if (check.ok && system !== null && s.architectures.length === 0) {
        await sql`update servers set architectures = ${[system]} where id = ${s.id} and architectures = '{}'`;
      }
      // Likewise its system features (the scheduler places a derivation that requires some only
      // on a worker that has them all): what the server's Nix would accept to build.
      if (check.ok && features !== null && features.length > 0 && s.features.length === 0) {
        await sql`update servers set features = ${features} where id = ${s.id} and features = '{}'`;
      }
      return { ...check, host_key_changed: changed };
    },

    /** The active servers with a pinned key, as kiln's build server workers need them. Internal: holds private keys. */
    targets: async (): Promise<BuildServerTarget[]> => {
      const targets = await buildServerTargets(sql, (organizationId) => sshKeys.privateKey(organizationId));
      const reachable = await Promise.all(targets.map((t) => outbound.connectableAddresses(t.host)));
      return targets.flatMap((t, i) => {
        const found = reachable[i]!;
        if ('refusal' in found) {
          deps.log.warn({ server: t.label, host: t.host, reason: found.refusal }, 'kiln does not connect to this build server: no worker runs for it');
          return [];
        }
        return [{ ...t, addresses: found.addresses }];
      });
    },
  };
}
export type ServersService = ReturnType<typeof serversService>;
