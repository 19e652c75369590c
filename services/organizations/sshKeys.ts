// An organization's SSH key: Ed25519 from node:crypto, written in OpenSSH's formats by hand
// (they are small): the public key line `ssh-ed25519 <base64 wire blob> kiln@<org>` for a
// server's authorized_keys, and the unencrypted `openssh-key-v1` private key that both ssh2 and
// OpenSSH read (PROTOCOL.key in OpenSSH's sources describes it).
import { generateKeyPairSync, randomBytes } from 'node:crypto';

const KEY_TYPE = 'ssh-ed25519';

function sshString(data: Uint8Array | string): Buffer {
  const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data);
  const length = Buffer.alloc(4);
  length.writeUInt32BE(bytes.length);
  return Buffer.concat([length, bytes]);
}

function uint32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

/** The public key as the SSH wire format encodes it: string "ssh-ed25519", string key. */
function publicBlob(publicKey: Uint8Array): Buffer {
  return Buffer.concat([sshString(KEY_TYPE), sshString(publicKey)]);
}

export interface SshKeyPair {
  /** `ssh-ed25519 AAAA… <comment>` */
  publicKey: string;
  /** `-----BEGIN OPENSSH PRIVATE KEY-----` … (unencrypted; kiln seals it at rest) */
  privateKey: string;
}

export function openSshPublicKey(publicKey: Uint8Array, comment: string): string {
  return `${KEY_TYPE} ${publicBlob(publicKey).toString('base64')} ${comment}`;
}

export function openSshPrivateKey(seed: Uint8Array, publicKey: Uint8Array, comment: string): string {
  const check = randomBytes(4);
  let secret = Buffer.concat([
    check, check,
    sshString(KEY_TYPE), sshString(publicKey),
    // OpenSSH keeps libsodium's 64-byte form: the seed followed by the public key.
    sshString(Buffer.concat([seed, publicKey])),
    sshString(comment),
  ]);
  // Padded with 1, 2, 3, … to the cipher block size, 8 for "none".
  const pad = (8 - (secret.length % 8)) % 8;
  secret = Buffer.concat([secret, Buffer.from(Array.from({ length: pad }, (_, i) => i + 1))]);
  const body = Buffer.concat([
    Buffer.from('openssh-key-v1\0', 'latin1'),
    sshString('none'), sshString('none'), sshString(''),
    uint32(1),
    sshString(publicBlob(publicKey)),
    sshString(secret),
  ]);
  const lines = body.toString('base64').match(/.{1,70}/g) ?? [];
  return ['-----BEGIN OPENSSH PRIVATE KEY-----', ...lines, '-----END OPENSSH PRIVATE KEY-----', ''].join('\n');
}

export function generateSshKeyPair(comment: string): SshKeyPair {
  const { privateKey } = generateKeyPairSync('ed25519');
  const jwk = privateKey.export({ format: 'jwk' });
  const seed = Buffer.from(jwk.d ?? '', 'base64url');
  const pub = Buffer.from(jwk.x ?? '', 'base64url');
  return { publicKey: openSshPublicKey(pub, comment), privateKey: openSshPrivateKey(seed, pub, comment) };
}
