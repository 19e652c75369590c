// Secrets at rest (an organization's SSH private key, a cache's signing key): AES-256-GCM with
// one key per installation: secrets.cryptFile when set, else generated once into
// <baseDir>/secrets/crypt.key (storage/instanceKeys.ts), never kept in the database.
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import type { Sql } from 'postgres';
import type { Config } from '../config/index.js';
import { resolveInstanceKey, type InstanceKeySpec } from './instanceKeys.js';

export interface SecretBox {
  /** `version ‖ 12-byte IV ‖ 16-byte tag ‖ ciphertext` */
  seal(plain: Uint8Array): Buffer;
  /** The plaintext of `seal`'s output; throws when the bytes were altered or sealed with another key. */
  open(sealed: Uint8Array): Buffer;
}

const VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;

/**
 * A key file holds any high-entropy text (`openssl rand -hex 32` is the documented way); HKDF
 * turns it into exactly 32 bytes, so the file's encoding does not matter.
 */
export function keyFromSecretText(text: string): Buffer {
  return Buffer.from(hkdfSync('sha256', Buffer.from(text, 'utf8'), Buffer.alloc(0), 'kiln secret box v1', KEY_BYTES));
}

export function secretBoxWithKey(key: Uint8Array): SecretBox {
  if (key.length !== KEY_BYTES) throw new Error(`a secret box key has ${KEY_BYTES} bytes, got ${key.length}`);
  const k = Buffer.from(key);
  return {
    seal(plain) {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', k, iv);
      const body = Buffer.concat([cipher.update(plain), cipher.final()]);
      return Buffer.concat([Buffer.from([VERSION]), iv, cipher.getAuthTag(), body]);
    },
    open(sealed) {
      const bytes = Buffer.from(sealed);
      if (bytes.length < 1 + IV_BYTES + TAG_BYTES || bytes[0] !== VERSION) {
        throw new Error('sealed secret is truncated or of an unknown version');
      }
      const iv = bytes.subarray(1, 1 + IV_BYTES);
      const tag = bytes.subarray(1 + IV_BYTES, 1 + IV_BYTES + TAG_BYTES);
      const decipher = createDecipheriv('aes-256-gcm', k, iv);
      decipher.setAuthTag(tag);
      try {
        return Buffer.concat([decipher.update(bytes.subarray(1 + IV_BYTES + TAG_BYTES)), decipher.final()]);
      } catch (cause) {
        throw new Error('cannot open a sealed secret: it was altered or sealed with another key (did secrets.cryptFile change?)', { cause });
      }
    },
  };
}

const CRYPT_KEY: InstanceKeySpec = { name: 'crypt.key', option: 'secrets.cryptFile', fromText: keyFromSecretText, replaceable: false };

/** The installation's box: the key from secrets.cryptFile, or the one generated under baseDir. */
export async function openSecretBox(sql: Sql, config: Pick<Config, 'baseDir' | 'secrets.cryptFile'>): Promise<SecretBox> {
  return secretBoxWithKey(await resolveInstanceKey(sql, { 'secrets.jwtFile': null, ...config }, CRYPT_KEY));
}
