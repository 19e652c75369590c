// The build servers kiln builds on (docs/builds.md, "Build servers"): every active server whose
// host key is pinned, with what its worker needs: the address, the pinned key, the systems and
// features of the record, the organization's private key and the projects it builds for (the
// organization's active projects). Internal: the answer holds private keys and is never served.
import type { Sql } from 'postgres';
import { MAX_CHALLENGE_PROJECTS } from '../../protocol/index.js';

export interface BuildServerTarget {
  serverId: string;
  /** `{org}/{server}`, for logs and messages */
  label: string;
  host: string;
  /**
   * The addresses `host` resolved to when the servers were last read, each within
   * outbound.allowedNetworks: ssh is given one of them, never the name (DNS rebinding).
   */
  addresses: string[];
  port: number;
  username: string;
  /** the pinned key, `ssh-ed25519 AAAA…` */
  hostKey: string;
  architectures: string[];
  features: string[];
  maxJobs: number;
  /** OpenSSH private key text */
  privateKey: string;
  /** UUIDs of the organization's active projects */
  projectIds: string[];
}

export async function buildServerTargets(sql: Sql, privateKey: (organizationId: string) => Promise<string>): Promise<Omit<BuildServerTarget, 'addresses'>[]> {
  const rows = await sql<{
    id: string; organization_id: string; label: string; host: string; port: number; username: string; host_key: string;
    architectures: string[]; features: string[]; max_jobs: number; project_ids: string[];
  }[]>`
    select s.id, s.organization_id, o.name || '/' || s.name as label, s.host, s.port, s.username, s.host_key,
           s.architectures, s.features, s.max_jobs,
           array(select p.id from projects p where p.organization_id = s.organization_id and p.active order by p.id limit ${MAX_CHALLENGE_PROJECTS}) as project_ids
    from servers s join organizations o on o.id = s.organization_id
    where s.active and s.host_key is not null and cardinality(s.architectures) > 0
    order by s.id`;
  const keys = new Map<string, string>();
  const targets: Omit<BuildServerTarget, 'addresses'>[] = [];
  for (const r of rows) {
    if (r.project_ids.length === 0) continue;
    if (!keys.has(r.organization_id)) keys.set(r.organization_id, await privateKey(r.organization_id));
    targets.push({
      serverId: r.id, label: r.label, host: r.host, port: r.port, username: r.username, hostKey: r.host_key,
      architectures: r.architectures, features: r.features, maxJobs: r.max_jobs, privateKey: keys.get(r.organization_id)!, projectIds: r.project_ids,
    });
  }
  return targets;
}
