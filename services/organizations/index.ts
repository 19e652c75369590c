// The public face of services/organizations/: what other domains and folders import from it.
export { organizationMembersService } from './organizationMembers.js';
export { organizationsService } from './organizations.js';
export { organizationSshKeyService } from './organizationSshKey.js';
export { serversService } from './servers.js';
export type { BuildServerTarget } from './buildServerTargets.js';
export { generateSshKeyPair } from './sshKeys.js';
