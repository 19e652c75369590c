// Secrets at rest (an organization's SSH private key, a cache's signing key): AES-256-GCM with
// one key per installation. The key comes from secrets.cryptFile when set, else it is generated
// once into instance_secrets 'crypt.key', so every server process of an installation shares it.
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import type { Sql } from 'postgres';
import { readSecretFile, type Config } from '../config/index.js';

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
const SECRET_NAME = 'crypt.key';

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

/** The installation's box: the key from secrets.cryptFile, or the generated one in the database. */
export async function openSecretBox(sql: Sql, config: Pick<Config, 'secrets.cryptFile'>): Promise<SecretBox> {
  const file = config['secrets.cryptFile'];
  if (file) return secretBoxWithKey(keyFromSecretText(readSecretFile(file)));
  // Several processes may start at once: the first insert wins and everyone reads the winner.
  await sql`insert into instance_secrets (name, value) values (${SECRET_NAME}, ${randomBytes(KEY_BYTES)}) on conflict (name) do nothing`;
  const [row] = await sql<{ value: Buffer }[]>`select value from instance_secrets where name = ${SECRET_NAME}`;
  if (!row) throw new Error(`instance_secrets has no ${SECRET_NAME} after inserting it`);
  return secretBoxWithKey(row.value);
}
