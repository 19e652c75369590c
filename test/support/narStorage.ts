// The binary cache's storage on its own, for storage tests: a fresh database, a blob store of the
// chosen backend (a temporary directory, or s3rver), a one-thread CPU pool, and test NARs made
// with dumpNar from temporary trees (no Nix needed).
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import postgres, { type Sql } from 'postgres';
import type { Test } from 'tap';
import { hashNar, SigningKey, type Narinfo } from '../../protocol/index.js';
import { acquireInstanceLease, createCpuPool, FilesystemBlobStore, openNarStorage, type BlobStore, type NarStorage } from '../../storage/index.js';
import { S3BlobStore } from '../../storage/blobs/s3BlobStore.js';
import { dumpNar } from '../../worker/index.js';
import { testDatabase } from './db.js';
import { createTestCache, type TestCache } from './caches.js';
import { startTestS3 } from './s3.js';

export type Backend = 'fs' | 's3';
export const BACKENDS: Backend[] = ['fs', 's3'];

export interface TestNarStorage {
  /** the test database's URL (another process would connect to it) */
  url: string;
  sql: Sql;
  blobs: BlobStore;
  nars: NarStorage;
  baseDir: string;
  /** the key of the real instance lease the storage claims staged uploads under */
  leaseKey: number;
  /** a cache row and a key to sign with (the tests sign with their own key, as services would pass it) */
  cache(name: string): Promise<TestCache & { key: SigningKey }>;
}

export async function openTestNarStorage(t: Test, backend: Backend, overrides: { partialTtlSecs?: number; graceHours?: number } = {}): Promise<TestNarStorage> {
  const { sql, url } = await testDatabase(t);
  const baseDir = await mkdtemp(join(tmpdir(), 'kiln-nars-'));
  t.teardown(() => rm(baseDir, { recursive: true, force: true }));
  const blobs: BlobStore = backend === 'fs' ? new FilesystemBlobStore(join(baseDir, 'blobs')) : new S3BlobStore((await startTestS3(t)).options());
  const cpu = createCpuPool({ maxThreads: 1 });
  const leaseKey = await testInstanceLease(t, url);
  const nars = openNarStorage({
    sql,
    blobs,
    cpu,
    leaseKey,
    log: pino({ level: 'silent' }),
    config: {
      baseDir,
      'nar.hotCacheBytes': 64 << 20,
      'nar.smallBytes': 1 << 20,
      'nar.maxUploadSize': 64 << 20,
      'nar.partialTtlSecs': overrides.partialTtlSecs ?? 86400,
      'gc.narUploadGraceHours': overrides.graceHours ?? 24,
      'gc.intervalSecs': 3600,
      'nar.maxConcurrentDownloads': 16,
      'nar.maxConcurrentServes': 8,
      'nar.storageOpenTimeoutSecs': 60,
    },
  });
  t.teardown(async () => {
    await nars.close();
    await cpu.destroy();
    await blobs.close();
  });
  return {
    url,
    sql,
    blobs,
    nars,
    baseDir,
    leaseKey,
    async cache(name) {
      const cache = await createTestCache(sql, name, { public: true, baseDir });
      return { ...cache, key: SigningKey.generate(`${name}-test-1`) };
    },
  };
}

/**
 * A real instance lease on the database at `url`, held on a connection of its own as a server
 * process holds one, and released at teardown: after a NAR storage opened later in the same test
 * is closed (tap runs teardowns last first).
 */
export async function testInstanceLease(t: Pick<Test, 'teardown'>, url: string): Promise<number> {
  const own = postgres(url, { max: 1, onnotice: () => undefined });
  const lease = await acquireInstanceLease(own).catch(async (e: unknown) => {
    await own.end();
    throw e;
  });
  t.teardown(async () => {
    await lease.release();
    await own.end({ timeout: 5 });
  });
  return lease.key;
}

export interface TestNar {
  nar: Buffer;
  info: Narinfo;
  hash: string;
}

let sequence = 0;

/**
 * A NAR of a small tree whose files hold `contents` (a reference is made by writing the other
 * path's store path into a file), with a narinfo that tells the truth about it.
 */
export async function makeTestNar(t: Test, contents: Record<string, string | Buffer>, references: string[] = [], name = 'test-path', selfReference = false): Promise<TestNar> {
  // A different valid hash part per NAR, so test paths never collide.
  const hash = (++sequence).toString().padStart(4, '0') + '0123456789abcdfghijklmnpqrsvwx'.slice(0, 28);
  const storePath = `/nix/store/${hash}-${name}`;
  if (selfReference) contents = { ...contents, self: `${storePath}\n` };
  const dir = await mkdtemp(join(tmpdir(), 'kiln-nar-src-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const root = join(dir, 'root');
  await mkdir(root);
  for (const [file, data] of Object.entries(contents)) await writeFile(join(root, file), data);
  const chunks: Uint8Array[] = [];
  for await (const chunk of dumpNar(root)) chunks.push(Buffer.from(chunk));
  const nar = Buffer.concat(chunks);
  const digest = await hashNar([nar]);
  return {
    nar,
    hash,
    info: {
      storePath,
      url: 'upload',
      compression: 'none',
      narHash: digest.narHash,
      narSize: digest.narSize,
      references: selfReference ? [...references, `${hash}-${name}`] : references,
      sigs: [],
    },
  };
}

export async function* chunksOf(bytes: Uint8Array, size = 4096): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < bytes.length; i += size) yield bytes.subarray(i, i + size);
}

export async function countRows(sql: Sql): Promise<{ cachedPaths: number; signatures: number; staged: number }> {
  const [row] = await sql<{ p: string; s: string; u: string }[]>`
    select (select count(*) from cached_paths) as p, (select count(*) from path_signatures) as s, (select count(*) from staged_uploads) as u`;
  return { cachedPaths: Number(row!.p), signatures: Number(row!.s), staged: Number(row!.u) };
}

export async function blobKeys(blobs: BlobStore): Promise<string[]> {
  const keys: string[] = [];
  for await (const entry of blobs.list('nar/')) keys.push(entry.key);
  return keys.sort();
}
