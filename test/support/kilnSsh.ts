// `ssh` options for a test kiln's SSH server: its port, one identity, and a known_hosts (in
// `dir`) holding kiln's host key only, so the real OpenSSH client checks it strictly.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import ssh2 from 'ssh2';
import type { TestKiln } from './kiln.js';

const { utils } = ssh2;

/** ssh takes the first value of an option: `extra` comes first, so a caller's choice wins. */
export function kilnSshOptions(kiln: TestKiln, dir: string, identity: string, extra: string[] = []): string[] {
  const hostKey = utils.parseKey(readFileSync(join(kiln.baseDir, 'ssh', 'ssh_host_ed25519_key')));
  const parsed = Array.isArray(hostKey) ? hostKey[0]! : hostKey;
  if (parsed instanceof Error) throw parsed;
  const knownHosts = join(dir, 'known_hosts');
  writeFileSync(knownHosts, `[127.0.0.1]:${kiln.sshPort} ${parsed.type} ${parsed.getPublicSSH().toString('base64')}\n`);
  return [
    ...extra, '-p', String(kiln.sshPort), '-i', identity, '-o', 'IdentitiesOnly=yes', '-o', `UserKnownHostsFile=${knownHosts}`,
    '-o', 'StrictHostKeyChecking=yes', '-o', 'BatchMode=yes', '-F', '/dev/null',
  ];
}
