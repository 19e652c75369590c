// A real OpenSSH server on loopback for one test: its own config, host key and authorized_keys
// in a temporary directory, on a free port, stopped at teardown. Runs as the current user
// (root in CI), so StrictModes and PAM are off.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import type { Test } from 'tap';
import { generateSshKeyPair } from '../../services/organizations/sshKeys.js';
import { freePort } from './kiln.js';
import { eventually } from './eventually.js';

export const SSHD = '/usr/sbin/sshd';

export interface TestSshd {
  port: number;
  username: string;
  /** replaces authorized_keys (sshd reads it on every login); a line may carry options such as command="…" */
  authorize(publicKeys: string[]): void;
  /** gives the server a new host key (SIGHUP: sshd starts over with its configuration) and waits until it listens again */
  rotateHostKey(): Promise<void>;
}

export async function startSshd(t: Pick<Test, 'teardown'>): Promise<TestSshd> {
  if (!existsSync(SSHD)) throw new Error(`the test needs OpenSSH's server at ${SSHD}: apt-get install -y openssh-server`);
  const dir = mkdtempSync(join(tmpdir(), 'kiln-sshd-'));
  const port = await freePort();
  const hostKey = join(dir, 'host_ed25519');
  writeFileSync(hostKey, generateSshKeyPair('kiln-test-host').privateKey, { mode: 0o600 });
  const authorizedKeys = join(dir, 'authorized_keys');
  writeFileSync(authorizedKeys, '', { mode: 0o600 });
  const config = join(dir, 'sshd_config');
  writeFileSync(config, [
    `Port ${port}`, 'ListenAddress 127.0.0.1', `HostKey ${hostKey}`, `AuthorizedKeysFile ${authorizedKeys}`,
    `PidFile ${join(dir, 'sshd.pid')}`, 'PasswordAuthentication no', 'KbdInteractiveAuthentication no',
    'PubkeyAuthentication yes', 'StrictModes no', 'UsePAM no', 'PermitRootLogin yes', 'LogLevel ERROR', '',
  ].join('\n'));
  mkdirSync('/run/sshd', { recursive: true }); // privilege separation directory sshd insists on
  const child = spawn(SSHD, ['-D', '-e', '-f', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  t.teardown(async () => {
    if (child.exitCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });
  await waitForPort(port, () => (child.exitCode !== null ? `sshd exited with ${child.exitCode}: ${stderr}` : null));
  const exited = () => (child.exitCode !== null ? `sshd exited with ${child.exitCode}: ${stderr}` : null);
  return {
    port,
    username: userInfo().username,
    authorize: (keys) => writeFileSync(authorizedKeys, keys.map((k) => `${k}\n`).join('')),
    async rotateHostKey() {
      const next = generateSshKeyPair('kiln-test-host');
      writeFileSync(hostKey, next.privateKey, { mode: 0o600 });
      child.kill('SIGHUP');
      // The old process may still answer for a moment: wait for the new key itself.
      const blob = next.publicKey.split(' ')[1]!;
      await eventually(() => {
        const problem = exited();
        if (problem) throw new Error(problem);
        const scan = spawnSync('ssh-keyscan', ['-p', String(port), '-t', 'ed25519', '127.0.0.1'], { encoding: 'utf8', timeout: 5000 });
        return scan.stdout.includes(blob);
      }, { timeout: 10_000, message: `sshd on port ${port} shows its new host key` });
    },
  };
}

async function waitForPort(port: number, failed: () => string | null): Promise<void> {
  await eventually(() => {
    const problem = failed();
    if (problem) throw new Error(problem);
    return new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1');
      s.once('connect', () => (s.destroy(), resolve(true)));
      s.once('error', () => resolve(false));
    });
  }, { timeout: 10_000, message: `sshd listens on port ${port}` });
}
