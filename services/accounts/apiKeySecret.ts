// API key secrets: "SVC" and 32 random bytes in base62 (letters and digits only, so a key survives
// shells, URLs and HTTP Basic passwords unquoted). 256 bits of entropy make a fast hash safe to
// store: nobody can guess their way through SHA-256 of a random 32-byte value.
import { createHash, randomBytes } from 'node:crypto';

export const API_KEY_PREFIX = 'SVC';
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/** ⌈256 / log2(62)⌉ */
const BODY_LENGTH = 43;
/** how much of a key lists show, so owners can tell their keys apart */
const SHOWN_PREFIX = 8;

export function generateApiKeySecret(): { secret: string; hash: string; prefix: string } {
  let n = BigInt(`0x${randomBytes(32).toString('hex')}`);
  let body = '';
  for (let i = 0; i < BODY_LENGTH; i++) {
    body = ALPHABET[Number(n % 62n)]! + body;
    n /= 62n;
  }
  const secret = API_KEY_PREFIX + body;
  return { secret, hash: hashApiKeySecret(secret), prefix: secret.slice(0, SHOWN_PREFIX) };
}

export function hashApiKeySecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

export const looksLikeApiKey = (token: string): boolean => token.startsWith(API_KEY_PREFIX);
