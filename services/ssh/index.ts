// The public face of services/ssh/: kiln's SSH server and users' SSH login keys (docs/ssh.md).
export { createSshServices, type SshServices } from './sshServices.js';
export type { SshServer } from './sshServer.js';
