// Real Nix as the binary cache's client, run asynchronously: the server under test lives in the
// same process, so a blocking exec would stop it from answering Nix.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NIX_OPTIONS, nixEnv } from './nixStore.js';

export interface NixRun {
  status: number;
  stdout: string;
  stderr: string;
}

export interface NixRunOptions {
  /** a netrc file for HTTP Basic credentials */
  netrc?: string;
  env?: NodeJS.ProcessEnv;
  input?: string;
}

export function runNix(command: 'nix' | 'nix-store' | 'nix-build', args: string[], opts: NixRunOptions = {}): Promise<NixRun> {
  const full = [
    ...(command === 'nix' ? ['--extra-experimental-features', 'nix-command'] : []),
    ...NIX_OPTIONS,
    // No caching of narinfo answers between runs: each test sees the cache as it is now.
    '--option', 'narinfo-cache-negative-ttl', '0',
    '--option', 'narinfo-cache-positive-ttl', '0',
    ...(opts.netrc ? ['--option', 'netrc-file', opts.netrc] : []),
    ...args,
  ];
  return new Promise((resolve, reject) => {
    const child = spawn(command, full, { env: { ...nixEnv(), ...opts.env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ status: code ?? -1, stdout, stderr }));
    child.stdin.end(opts.input ?? '');
  });
}

/** Throws with Nix's own output unless the run succeeded. */
export async function nixOk(command: 'nix' | 'nix-store' | 'nix-build', args: string[], opts: NixRunOptions = {}): Promise<string> {
  const run = await runNix(command, args, opts);
  if (run.status !== 0) throw new Error(`${command} ${args.join(' ')} exited ${run.status}:\n${run.stderr}`);
  return run.stdout;
}

/** A netrc file granting `password` for 127.0.0.1; removed when the process exits. */
export function netrcFile(password: string, login = 'kiln'): string {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-netrc-'));
  const file = join(dir, 'netrc');
  writeFileSync(file, `machine 127.0.0.1\nlogin ${login}\npassword ${password}\n`, { mode: 0o600 });
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  return file;
}

/** A fresh, empty Nix store directory to substitute into; removed when the process exits. */
export function freshStore(): string {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-store-'));
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
