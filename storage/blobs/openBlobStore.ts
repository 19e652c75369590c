// The blob store the configuration asks for, checked before the server starts taking uploads, so a
// wrong bucket or an unwritable directory fails at start with its name rather than on the first push.
import { join } from 'node:path';
import type { Config } from '../../config/index.js';
import type { BlobStore } from './blobStore.js';
import { ensureDirectory } from './durableFile.js';
import { FilesystemBlobStore } from './filesystemBlobStore.js';

/** The filesystem store's root when s3.enable is false. */
export function blobRoot(config: Pick<Config, 'baseDir'>): string {
  return join(config.baseDir, 'blobs');
}

export async function openBlobStore(config: Config): Promise<BlobStore> {
  if (!config['s3.enable']) {
    const root = blobRoot(config);
    await ensureDirectory(root);
    return new FilesystemBlobStore(root);
  }
  // loaded only with s3.enable: the AWS SDK adds ~25 MiB to a process that stores on its filesystem
  const { S3BlobStore } = await import('./s3BlobStore.js');
  const store = new S3BlobStore({
    bucket: config['s3.bucket'],
    prefix: config['s3.prefix'],
    endpoint: config['s3.endpoint'],
    region: config['s3.region'],
    virtualHostedStyle: config['s3.virtualHostedStyle'],
    accessKeyId: config['s3.accessKeyId'],
    secretAccessKeyFile: config['s3.secretAccessKeyFile'],
    maxRetries: config['s3.maxRetries'],
    readTimeoutSecs: config['s3.readTimeoutSecs'],
    retryTimeoutSecs: config['s3.retryTimeoutSecs'],
  });
  try {
    await store.checkAccess();
  } catch (error) {
    await store.close();
    throw error;
  }
  return store;
}
