// `ssh` options for a test kiln's SSH server: its port, one identity, and a known_hosts (in
// `dir`) holding kiln's host key only, so the real OpenSSH client checks it strictly.
import { spawn } from 'node:child_process';
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

/** Runs a command with `input` as its whole stdin; its stdout as bytes (a protocol session's answers). */
export function runWithInput(command: string, args: string[], input: Buffer, env?: NodeJS.ProcessEnv): Promise<{ status: number; stdout: Buffer; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'], ...(env === undefined ? {} : { env }) });
    const out: Buffer[] = [];
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ status: code ?? -1, stdout: Buffer.concat(out), stderr }));
    child.stdin.on('error', () => undefined); // the server may close before it read everything
    child.stdin.end(input);
  });
}
