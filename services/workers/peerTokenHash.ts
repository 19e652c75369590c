// How a worker peer token is kept: the lowercase hex SHA-256 of the token (DESIGN.md, "The model":
// peer tokens are 48 random bytes, so a fast hash is as safe as a slow one and a reconnect storm
// of 1,000 workers costs microseconds, not 1,000 argon2 runs). Rows written before this hold an
// argon2id PHC string: they still verify, and workerAuth.ts rewrites them on the first success.
import { createHash, timingSafeEqual } from 'node:crypto';
import argon2 from 'argon2';

const SHA256_HEX = /^[0-9a-f]{64}$/;

export function hashPeerToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/** Whether a stored hash is the old argon2 form, to be rewritten once its token verifies. */
export function isLegacyPeerTokenHash(stored: string): boolean {
  return !SHA256_HEX.test(stored);
}

/** Does `token` match the stored hash (SHA-256 hex, or a legacy argon2 PHC string)? */
export async function peerTokenMatches(stored: string, token: string): Promise<boolean> {
  if (SHA256_HEX.test(stored)) return timingSafeEqual(Buffer.from(stored, 'hex'), createHash('sha256').update(token).digest());
  if (!stored.startsWith('$argon2')) return false;
  return argon2.verify(stored, token).catch(() => false);
}
