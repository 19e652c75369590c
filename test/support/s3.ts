// The S3 server for tests: s3rver on 127.0.0.1 behind the strict front (s3Front/), which verifies
// SigV4 signatures and adds what s3rver lacks (multipart abort and listing, atomic overwrite).
// Each call starts both on free ports with a temporary directory, the bucket created up front and a
// secret file holding the account's credentials (S3RVER/S3RVER, s3rver's own account).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Test } from 'tap';
import type { S3BlobStoreOptions } from '../../storage/blobs/index.js';
import { startS3Front, type S3Front } from './s3Front/s3Front.js';

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

export const TEST_S3_REGION = 'us-east-1';
export const TEST_S3_ACCESS_KEY_ID = 'S3RVER';
export const TEST_S3_SECRET = 'S3RVER';

export interface TestS3 {
  /** the front's address: what clients use */
  endpoint: string;
  /** s3rver's own address, behind the front: it checks no signatures */
  upstream: string;
  bucket: string;
  /** s3rver's own data directory, to look behind the API */
  directory: string;
  front: S3Front;
  /** options for an S3BlobStore on this server; override any of them */
  options(overrides?: Partial<S3BlobStoreOptions>): S3BlobStoreOptions;
}

export interface TestS3Options {
  bucket?: string;
  /** the server's clock (request-time skew, presigned expiry, upload initiation) */
  now?: () => Date;
  /** ListMultipartUploads' page size */
  maxUploads?: number;
}

export async function startTestS3(t: Pick<Test, 'teardown'>, { bucket = 'kiln', now, maxUploads }: TestS3Options = {}): Promise<TestS3> {
  const root = await mkdtemp(join(tmpdir(), 'kiln-s3-'));
  const directory = join(root, 'data');
  const secretFile = join(root, 'secret');
  await writeFile(secretFile, `${TEST_S3_SECRET}\n`);
  const server = new S3rverClass({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: bucket }] });
  const { port } = await server.run();
  const upstream = `http://127.0.0.1:${port}`;
  const front = await startS3Front({
    upstream,
    region: TEST_S3_REGION,
    accounts: [{ accessKeyId: TEST_S3_ACCESS_KEY_ID, secretAccessKey: TEST_S3_SECRET }],
    buckets: [bucket],
    scratchDir: root,
    ...(now && { now }),
    ...(maxUploads !== undefined && { maxUploads }),
  });
  t.teardown(async () => {
    await front.close();
    await server.close();
    await rm(root, { recursive: true, force: true });
  });
  return {
    endpoint: front.endpoint,
    upstream,
    bucket,
    directory,
    front,
    options: (overrides = {}) => ({
      bucket,
      prefix: '',
      endpoint: front.endpoint,
      region: TEST_S3_REGION,
      virtualHostedStyle: false,
      accessKeyId: TEST_S3_ACCESS_KEY_ID,
      secretAccessKeyFile: secretFile,
      maxRetries: 1,
      readTimeoutSecs: 30,
      retryTimeoutSecs: 60,
      ...overrides,
    }),
  };
}
