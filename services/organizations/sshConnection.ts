// POST /servers/{org}/{server}/check-connection: log in with the organization's key and ask the
// server for its Nix version. The host key is not pinned yet (kiln has no known_hosts store), so
// its fingerprint is reported for the operator to compare.
import { createHash } from 'node:crypto';
import ssh2 from 'ssh2';

export type ConnectionCheck =
  | { ok: true; host_key_fingerprint: string; nix_version: string | null }
  | { ok: false; host_key_fingerprint: string | null; reason: string };

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

export function checkSshConnection(target: SshTarget, timeoutMs = SSH_CHECK_TIMEOUT_MS): Promise<ConnectionCheck> {
  return new Promise((resolve) => {
    const client = new ssh2.Client();
    let fingerprint: string | null = null;
    let settled = false;
    const finish = (result: ConnectionCheck) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      client.end();
      resolve(result);
    };
    // readyTimeout covers the handshake; this covers the command too.
    const timer = setTimeout(() => finish({ ok: false, host_key_fingerprint: fingerprint, reason: `no answer within ${Math.round(timeoutMs / 1000)} s` }), timeoutMs);
    client.on('ready', () => {
      client.exec('nix-store --version', (err, stream) => {
        if (err) return finish({ ok: true, host_key_fingerprint: fingerprint!, nix_version: null });
        let out = '';
        stream.on('data', (d: Buffer) => (out += d.toString('utf8')));
        stream.stderr.on('data', () => undefined);
        stream.on('close', (code: number | null) => {
          finish({ ok: true, host_key_fingerprint: fingerprint!, nix_version: code === 0 ? out.trim().split('\n')[0] ?? null : null });
        });
      });
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
          return true;
        },
      });
    } catch (e) {
      finish({ ok: false, host_key_fingerprint: null, reason: e instanceof Error ? e.message : String(e) });
    }
  });
}
