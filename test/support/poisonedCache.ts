// Signed file:// binary caches for the shared-store tests (worker/storeTrust.ts): an organization's
// cache, and what a hostile tenant can upload to its own, any contents under any store path, signed
// by its cache's key.
import { execFileSync } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { formatHash, renderNarinfo, signNarinfo, SigningKey, storePathHashPart } from '../../protocol/index.js';

export interface SignedCache {
  url: string;
  dir: string;
  key: SigningKey;
  /** its secret key's file, for `nix copy --to <url>?secret-key=<file>` */
  keyFile: string;
}

/** An empty cache at `<dir>/<name>` with a fresh key. */
export function signedCache(dir: string, name: string): SignedCache {
  const key = SigningKey.generate(`${name}-${randomUUID().slice(0, 8)}`);
  const cacheDir = join(dir, name);
  mkdirSync(join(cacheDir, 'nar'), { recursive: true });
  writeFileSync(join(cacheDir, 'nix-cache-info'), 'StoreDir: /nix/store\n');
  const keyFile = join(dir, `${name}.sec`);
  writeFileSync(keyFile, key.toString(), { mode: 0o600 });
  return { url: `file://${cacheDir}`, dir: cacheDir, key, keyFile };
}

/** Writes into `c`, signed, a single-file path with `contents` under the store path `path`. */
export function poison(c: SignedCache, path: string, contents: string, env: NodeJS.ProcessEnv): void {
  const file = join(c.dir, `poison-${randomUUID()}`);
  writeFileSync(file, contents);
  const nar = execFileSync('nix-store', ['--dump', file], { env });
  const narHash = formatHash({ algorithm: 'sha256', digest: createHash('sha256').update(nar).digest() });
  const narFile = `nar/${randomUUID()}.nar`;
  writeFileSync(join(c.dir, narFile), nar);
  const fields = { storePath: path, narHash, narSize: nar.length, references: [] };
  writeFileSync(join(c.dir, `${storePathHashPart(path)}.narinfo`), renderNarinfo({ ...fields, url: narFile, compression: 'none', sigs: [signNarinfo(fields, c.key)] }));
}
