// A cache's Ed25519 signing key, generated when the cache is created (API or state file) and anew
// at each rotation. The key name is `<host>-<cache>-N`, N counting from 1 up with each rotation,
// what `trusted-public-keys` shows the user; the secret half is sealed with the installation's
// secret box before it reaches the database.
import { SigningKey } from '../../protocol/index.js';
import type { CacheKeyColumns, SecretBox } from '../../storage/index.js';

export type { CacheKeyColumns };

/** The host part of key names: the configured domain, else the host of serveUrl. */
export function keyHost(config: { domain: string | null; serveUrl: string }): string {
  const host = config.domain ?? new URL(config.serveUrl).hostname;
  return host.replace(/[^A-Za-z0-9.-]/g, '-') || 'kiln';
}

export function cacheKeyName(host: string, cache: string, generation = 1): string {
  return `${host}-${cache}-${generation}`;
}

/** The generation a key name ends in (`…-N`); 1 for a name without one. */
export function keyGeneration(keyName: string): number {
  const match = /-(\d{1,9})$/.exec(keyName);
  return match ? Number(match[1]) : 1;
}

export function generateCacheKey(box: SecretBox, host: string, cache: string, generation = 1): CacheKeyColumns {
  const key = SigningKey.generate(cacheKeyName(host, cache, generation));
  const secret = Buffer.from(key.toString().slice(key.name.length + 1), 'base64');
  return {
    key_name: key.name,
    public_key: secret.subarray(32),
    secret_key: box.seal(secret),
  };
}

/** The signing key of a cache row, for signing narinfos. */
export function openCacheKey(box: SecretBox, row: { key_name: string; secret_key: Uint8Array }): SigningKey {
  const parsed = SigningKey.parse(`${row.key_name}:${box.open(row.secret_key).toString('base64')}`);
  if (!parsed.ok) throw new Error(`cache key ${row.key_name} is corrupt: ${parsed.reason}`);
  return parsed.value;
}

/** `<key name>:<base64>`, what Nix's trusted-public-keys takes. */
export function cachePublicKeyText(row: { key_name: string; public_key: Uint8Array }): string {
  return `${row.key_name}:${Buffer.from(row.public_key).toString('base64')}`;
}
