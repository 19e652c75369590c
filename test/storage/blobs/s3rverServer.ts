// A real S3-compatible server for one test: s3rver on 127.0.0.1, a free port, a temporary directory,
// the bucket created up front, and a secret file holding s3rver's fixed credentials (S3RVER/S3RVER).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Test } from 'tap';
import type { S3BlobStoreOptions } from '../../../storage/blobs/index.js';

// s3rver ships no types; these are the parts of its API (lib/s3rver.js) the tests use.
interface S3rverOptions {
  address: string;
  port: number;
  silent: boolean;
  directory: string;
  configureBuckets: { name: string }[];
}
interface S3rver {
  run(): Promise<AddressInfo>;
  close(): Promise<void>;
}
const S3rverClass = createRequire(import.meta.url)('s3rver') as new (options: S3rverOptions) => S3rver;

export interface TestS3 {
  endpoint: string;
  bucket: string;
  /** s3rver's own data directory, to look behind the API */
  directory: string;
  /** options for an S3BlobStore on this server; override any of them */
  options(overrides?: Partial<S3BlobStoreOptions>): S3BlobStoreOptions;
}

export async function startS3rver(t: Pick<Test, 'teardown'>, bucket = 'kiln'): Promise<TestS3> {
  const root = await mkdtemp(join(tmpdir(), 'kiln-s3rver-'));
  const directory = join(root, 'data');
  const secretFile = join(root, 'secret');
  await writeFile(secretFile, 'S3RVER\n');
  const server = new S3rverClass({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: bucket }] });
  const { port } = await server.run();
  t.teardown(async () => {
    await server.close();
    await rm(root, { recursive: true, force: true });
  });
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    endpoint,
    bucket,
    directory,
    options: (overrides = {}) => ({
      bucket,
      prefix: '',
      endpoint,
      region: 'us-east-1',
      virtualHostedStyle: false,
      accessKeyId: 'S3RVER',
      secretAccessKeyFile: secretFile,
      maxRetries: 1,
      readTimeoutSecs: 30,
      retryTimeoutSecs: 60,
      ...overrides,
    }),
  };
}
