// The signing secret of a webhook or send_web_request action: 32 random bytes as 64 hex
// characters, the HMAC key of X-Service-Signature. Shown once (on create and on rotate-secret) and
// stored sealed, because kiln must sign with it again on every delivery.
import { randomBytes } from 'node:crypto';
import type { SecretBox } from '../../storage/index.js';

export interface SigningSecret {
  /** what the caller is shown once */
  text: string;
  /** what is stored */
  sealed: Buffer;
}

export function newSigningSecret(box: SecretBox): SigningSecret {
  const text = randomBytes(32).toString('hex');
  return { text, sealed: box.seal(Buffer.from(text, 'utf8')) };
}

export function openSigningSecret(box: SecretBox, sealed: Buffer): string {
  return box.open(sealed).toString('utf8');
}
