// The two keys of an installation: crypt.key (the secret box: SSH keys, cache signing keys,
// webhook secrets, upstream credentials) and jwt.secret (session tokens). Each is the operator's
// file (secrets.cryptFile / secrets.jwtFile) or one kiln generates once into
// <baseDir>/secrets/, mode 0600. Never the database: a copy of the database alone must not open
// sealed secrets or forge sessions. The database keeps a fingerprint of each key, so a process
// holding another key, or none, refuses to start instead of generating a second key that cannot
// open what the first one sealed. Older versions kept generated keys in instance_secrets; such a
// row moves to the key file on the next start and is deleted.
import { createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { link, mkdir, open, stat, unlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Sql, TransactionSql } from 'postgres';
import { ConfigError, readSecretFile, type Config } from '../config/index.js';

export type InstanceKeyName = 'crypt.key' | 'jwt.secret';

export interface InstanceKeySpec {
  /** the fingerprint's name, and the row name older versions used in instance_secrets */
  name: InstanceKeyName;
  /** the option naming an operator's key file */
  option: 'secrets.cryptFile' | 'secrets.jwtFile';
  /** the key an operator's text stands for (the box derives one with HKDF, HS256 takes the text's bytes) */
  fromText(text: string): Uint8Array;
  /**
   * Whether the operator may replace the key file: a new session key only logs everyone out, so
   * the fingerprint follows it; a new box key could not open what is sealed, so it is refused.
   */
  replaceable: boolean;
}

/** The file kiln generates a key into when its option is not set. */
export function generatedKeyFile(baseDir: string, name: InstanceKeyName): string {
  return join(baseDir, 'secrets', name === 'crypt.key' ? 'crypt.key' : 'jwt.key');
}

// What kiln writes: the raw key, so a key moved out of instance_secrets keeps opening what it
// sealed. Any other text in a key file is an operator's secret, turned into a key by `fromText`.
const RAW_PREFIX = 'kiln-key-v1:';
const RAW_KEY = /^kiln-key-v1:([A-Za-z0-9+/]{43}=)$/;

export function rawKeyFileText(key: Uint8Array): string {
  return `${RAW_PREFIX}${Buffer.from(key).toString('base64')}\n`;
}

function keyOfText(spec: InstanceKeySpec, text: string): Uint8Array {
  const raw = RAW_KEY.exec(text);
  return raw ? Buffer.from(raw[1]!, 'base64') : spec.fromText(text);
}

/** HMAC-SHA256 of a fixed label under the key: tells keys apart without revealing them. */
export function keyFingerprint(key: Uint8Array): Buffer {
  return createHmac('sha256', key).update('kiln instance key fingerprint v1').digest();
}

const same = (a: Uint8Array, b: Uint8Array) => a.length === b.length && timingSafeEqual(a, b);

async function readKeyFileIfAny(spec: InstanceKeySpec, file: string): Promise<Uint8Array | null> {
  try {
    await stat(file);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
  return keyOfText(spec, readSecretFile(file));
}

/**
 * Creates `file` holding `key`, complete or not at all: written and synced under a temporary
 * name, then hard-linked into place, which fails if the file exists (O_EXCL's guarantee, without
 * ever exposing a half-written file). Returns false when another process created it first.
 */
async function createKeyFile(file: string, key: Uint8Array): Promise<boolean> {
  await mkdir(dirname(file), { recursive: true, mode: 0o700 });
  const temp = `${file}.${randomUUID()}.tmp`;
  const handle = await open(temp, 'wx', 0o600);
  try {
    await handle.writeFile(rawKeyFileText(key));
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await link(temp, file);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw e;
  } finally {
    await unlink(temp).catch(() => undefined);
  }
  const dir = await open(dirname(file), 'r');
  await dir.sync().finally(() => dir.close());
  return true;
}

type KeyConfig = Pick<Config, 'baseDir' | 'secrets.cryptFile' | 'secrets.jwtFile'>;

function missingKey(spec: InstanceKeySpec, generated: string): ConfigError {
  return new ConfigError([
    `${spec.option} is not set and ${generated} does not exist, but this database already has a ${spec.name} ` +
      `(another server process generated it): copy that process's key file (its <baseDir>/secrets/${generated.split('/').pop()!}) ` +
      `to this host and set ${spec.option} to it (docs/auth.md, "Several server processes"). kiln does not generate a second key, ` +
      `which could not open what the first one sealed.`,
  ]);
}

function otherKey(spec: InstanceKeySpec, source: string, against: string): ConfigError {
  return new ConfigError([
    `${source} is not the ${spec.name} ${against}: set ${spec.option} to the installation's key file ` +
      `(docs/auth.md, "Several server processes").`,
  ]);
}

/**
 * The installation's key `spec.name`, decided under one advisory lock so that processes starting
 * together on a fresh database agree: the first generates, the others find its file or refuse.
 */
export async function resolveInstanceKey(sql: Sql, config: KeyConfig, spec: InstanceKeySpec): Promise<Uint8Array> {
  const configured = config[spec.option];
  const generated = generatedKeyFile(config['baseDir'], spec.name);
  return sql.begin(async (tx: TransactionSql) => {
    await tx`select pg_advisory_xact_lock(hashtextextended('kiln instance keys', 0))`;
    const [legacy] = await tx<{ value: Buffer }[]>`select value from instance_secrets where name = ${spec.name}`;
    const [mark] = await tx<{ fingerprint: Buffer }[]>`select fingerprint from instance_key_fingerprints where name = ${spec.name}`;
    let key: Uint8Array;
    let source: string;
    if (configured) {
      key = keyOfText(spec, readSecretFile(configured));
      source = `${spec.option} (${configured})`;
    } else {
      source = generated;
      const existing = await readKeyFileIfAny(spec, generated);
      if (existing) key = existing;
      else if (legacy) key = await createOrRead(spec, generated, legacy.value);
      else if (mark) throw missingKey(spec, generated);
      else key = await createOrRead(spec, generated, randomBytes(32));
    }
    if (legacy && !same(legacy.value, key) && !spec.replaceable) {
      throw new ConfigError([
        `${source} is not the ${spec.name} kept in the database by an older kiln, which sealed the secrets there. ` +
          `Unset ${spec.option} and remove ${generated} once, so that kiln moves the database's key into ${generated}; ` +
          `then copy that file wherever ${spec.option} should point (docs/auth.md, "Several server processes").`,
      ]);
    }
    const fingerprint = keyFingerprint(key);
    if (mark && !same(mark.fingerprint, fingerprint)) {
      if (!spec.replaceable) throw otherKey(spec, source, 'this database\'s secrets were sealed with');
      if (!configured) throw otherKey(spec, source, 'the other server processes of this database sign sessions with');
      // The operator replaced secrets.jwtFile: sessions signed with the old key end, as documented.
      await tx`update instance_key_fingerprints set fingerprint = ${fingerprint}, created_at = now() where name = ${spec.name}`;
    }
    if (!mark) await tx`insert into instance_key_fingerprints (name, fingerprint) values (${spec.name}, ${fingerprint})`;
    // Only now that the key is in its file (synced) does the database copy go.
    if (legacy) await tx`delete from instance_secrets where name = ${spec.name}`;
    return key;
  });
}

/** `key` written to a new `file`, or, when another process on this baseDir was first, the key in its file. */
async function createOrRead(spec: InstanceKeySpec, file: string, key: Uint8Array): Promise<Uint8Array> {
  if (await createKeyFile(file, key)) return key;
  return keyOfText(spec, readSecretFile(file));
}
