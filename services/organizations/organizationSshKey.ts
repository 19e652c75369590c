// An organization's Ed25519 SSH key (OpenSSH format).
import { ApiError } from '../../protocol/index.js';
import type { AccessDeps } from '../access/index.js';
import type { Principal } from '../access/index.js';
import { generateSshKeyPair } from './sshKeys.js';
import { organizationEvent } from './organizations.js';
import { demandOrganization } from '../access/index.js';

export interface SshKeyView {
  /** `ssh-ed25519 AAAA… kiln@<org>`, for the build servers' authorized_keys */
  public_key: string;
}

// /orgs/{org}/ssh: the key kiln uses to reach the organization's build servers. Regenerating
// replaces it at once; servers must then be given the new public key.
export function organizationSshKeyService({ sql, secretBox, events }: AccessDeps) {
  return {
    async get(who: Principal, org: string): Promise<SshKeyView> {
      const { row } = await demandOrganization(sql, who, org, 'viewOrg');
      return { public_key: row.ssh_public_key };
    },

    async regenerate(who: Principal, org: string): Promise<SshKeyView> {
      const { row } = await demandOrganization(sql, who, org, 'manageServers');
      const keys = generateSshKeyPair(`kiln@${row.name}`);
      await events.transaction(async (tx, emit) => {
        await tx`
          update organizations set ssh_public_key = ${keys.publicKey}, ssh_private_key = ${secretBox.seal(Buffer.from(keys.privateKey))}
          where id = ${row.id}`;
        const { content, scope } = organizationEvent(row);
        emit('organization.ssh_key.rotate', content, scope);
      });
      return { public_key: keys.publicKey };
    },

    /** The private key in OpenSSH format, for connecting to the organization's servers. Internal: never served. */
    async privateKey(organizationId: string): Promise<string> {
      const [row] = await sql<{ ssh_private_key: Buffer }[]>`select ssh_private_key from organizations where id = ${organizationId}`;
      if (!row) throw new ApiError('not_found', `no organization ${organizationId}`);
      return secretBox.open(row.ssh_private_key).toString('utf8');
    },
  };
}
export type OrganizationSshKeyService = ReturnType<typeof organizationSshKeyService>;
