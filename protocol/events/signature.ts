// X-Service-Signature: sha256=<hex HMAC-SHA256 of the raw body, keyed with the signing secret>.
import { createHmac, timingSafeEqual } from 'node:crypto';

export const SIGNATURE_HEADER = 'x-service-signature';

export function signBody(secret: string, body: string | Uint8Array): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/** Constant time in the signature's content: a receiver must not leak how many characters matched. */
export function verifySignature(secret: string, body: string | Uint8Array, header: string | undefined | null): boolean {
  if (!header) return false;
  const expected = Buffer.from(signBody(secret, body));
  const given = Buffer.from(header.trim());
  return given.length === expected.length && timingSafeEqual(given, expected);
}
