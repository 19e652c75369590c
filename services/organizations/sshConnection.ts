// POST /servers/{org}/{server}/check-connection: log in with the organization's key and ask the
// server for its Nix version, system and system features. Whatever key the server shows is accepted here and reported: this
// check is the admin's act of trust, and servers.ts pins the key it saw when the login worked
// (the builds' connections accept only the pinned key).
import { createHash } from 'node:crypto';
import type { Client } from 'ssh2';

export type ConnectionCheck =
  | { ok: true; host_key_fingerprint: string; nix_version: string | null }
  | { ok: false; host_key_fingerprint: string | null; reason: string };

/**
 * A check, the key the server showed as an OpenSSH public key line (`ssh-ed25519 AAAA…`), and the
 * server's system and system features as its Nix reports them (`builtins.currentSystem`, the
 * `system-features` setting; null when that failed).
 */
export type SshCheckResult = ConnectionCheck & { hostKey: string | null; system: string | null; features: string[] | null };

/** The probe's answer: a quoted system name such as "x86_64-linux". */
const PROBED_SYSTEM = /^"([A-Za-z0-9_.+-]{1,64})"$/;
/** A feature as a server record takes it (protocol/api/servers.ts); anything else is dropped. */
const FEATURE = /^[A-Za-z0-9_.-]{1,64}$/;
/** The most features kept from a probe. */
const MAX_PROBED_FEATURES = 64;

/** `nix show-config`'s `system-features = a b c` line, its names as a record takes them; null without the line. */
export function probedFeatures(shown: string): string[] | null {
  const line = shown.split('\n').find((l) => l.startsWith('system-features = '));
  if (line === undefined) return null;
  const names = line.slice('system-features = '.length).trim().split(/\s+/).filter((f) => FEATURE.test(f));
  return [...new Set(names)].sort().slice(0, MAX_PROBED_FEATURES);
}

/** Runs one command over the connection: its exit code and the first `limit` characters of its output. */
function run(client: Client, command: string, limit = 4096): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    client.exec(command, (err, stream) => {
      if (err) return resolve({ code: null, out: '' });
      let out = '';
      stream.on('data', (d: Buffer) => {
        if (out.length < limit) out += d.toString('utf8');
      });
      stream.stderr.on('data', () => undefined);
      stream.on('close', (code: number | null) => resolve({ code, out }));
    });
  });
}

export interface SshTarget {
  host: string;
  port: number;
  username: string;
  /** OpenSSH private key text */
  privateKey: string;
}

export const SSH_CHECK_TIMEOUT_MS = 15_000;

/** `SHA256:<base64 without padding>`, the form `ssh-keygen -l` prints. */
export function sshFingerprint(hostKeyBlob: Buffer): string {
  return `SHA256:${createHash('sha256').update(hostKeyBlob).digest('base64').replace(/=+$/, '')}`;
}

/** The key blob as a known_hosts entry takes it: its algorithm name (the blob's first string), a space, the blob in base64. */
export function hostKeyLine(hostKeyBlob: Buffer): string | null {
  if (hostKeyBlob.length < 4) return null;
  const length = hostKeyBlob.readUInt32BE(0);
  const algorithm = hostKeyBlob.subarray(4, 4 + length).toString('latin1');
  if (length === 0 || 4 + length > hostKeyBlob.length || !/^[a-z0-9@.-]+$/.test(algorithm)) return null;
  return `${algorithm} ${hostKeyBlob.toString('base64')}`;
}

/** The fingerprint of a pinned key line. */
export const hostKeyLineFingerprint = (line: string): string => sshFingerprint(Buffer.from(line.slice(line.indexOf(' ') + 1), 'base64'));

export async function checkSshConnection(target: SshTarget, timeoutMs = SSH_CHECK_TIMEOUT_MS): Promise<SshCheckResult> {
  // ssh2 is loaded at the first check, not by every process (docs/operations.md, "Memory at rest")
  const { Client: SshClient } = (await import('ssh2')).default;
  return new Promise((resolve) => {
    const client = new SshClient();
    let fingerprint: string | null = null;
    let hostKey: string | null = null;
    let system: string | null = null;
    let features: string[] | null = null;
    let settled = false;
    const finish = (result: ConnectionCheck) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      client.end();
      resolve({ ...result, hostKey, system, features });
    };
    // readyTimeout covers the handshake; this covers the command too.
    const timer = setTimeout(() => finish({ ok: false, host_key_fingerprint: fingerprint, reason: `no answer within ${Math.round(timeoutMs / 1000)} s` }), timeoutMs);
    client.on('ready', () => {
      void (async () => {
        const version = await run(client, 'nix-store --version');
        const nixVersion = version.code === 0 ? version.out.trim().split('\n')[0] ?? null : null;
        if (nixVersion !== null) {
          // Side by side on the one connection: the check has SSH_CHECK_TIMEOUT_MS for all of it.
          // `nix show-config` needs the nix-command feature, which a server's Nix may not enable.
          const [probed, shown] = await Promise.all([
            run(client, 'nix-instantiate --eval --expr builtins.currentSystem'),
            run(client, 'nix --extra-experimental-features nix-command show-config', 256 * 1024),
          ]);
          system = probed.code === 0 ? PROBED_SYSTEM.exec(probed.out.trim())?.[1] ?? null : null;
          features = shown.code === 0 ? probedFeatures(shown.out) : null;
        }
        finish({ ok: true, host_key_fingerprint: fingerprint!, nix_version: nixVersion });
      })();
    });
    client.on('error', (err: Error & { level?: string }) => {
      const reason = err.level === 'client-authentication'
        ? `the server refused the organization's key for user ${target.username} (add the key from GET /orgs/{org}/ssh to its authorized_keys)`
        : err.message;
      finish({ ok: false, host_key_fingerprint: fingerprint, reason });
    });
    try {
      client.connect({
        host: target.host,
        port: target.port,
        username: target.username,
        privateKey: target.privateKey,
        readyTimeout: timeoutMs,
        hostVerifier: (key: Buffer) => {
          fingerprint = sshFingerprint(key);
          hostKey = hostKeyLine(key);
          return true;
        },
      });
    } catch (e) {
      finish({ ok: false, host_key_fingerprint: null, reason: e instanceof Error ? e.message : String(e) });
    }
  });
}
