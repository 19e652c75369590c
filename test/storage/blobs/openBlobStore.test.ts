import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { loadConfig, type OptionPath } from '../../../config/index.js';
import { FilesystemBlobStore, openBlobStore } from '../../../storage/blobs/index.js';
import { S3BlobStore } from '../../../storage/blobs/s3BlobStore.js';
import { chunks } from './blobContent.js';
import { startTestS3 } from '../../support/s3.js';

async function tempDir(t: Test): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'kiln-open-blobs-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

const configWith = (overrides: Partial<Record<OptionPath, unknown>>) => loadConfig({ scope: 'server', env: {}, overrides }).values;

t.test('without s3.enable: the filesystem under <baseDir>/blobs, created at open', async (t) => {
  const baseDir = await tempDir(t);
  const store = await openBlobStore(configWith({ baseDir }));
  t.teardown(() => store.close());
  t.equal(store.backend, 'fs');
  t.ok(store instanceof FilesystemBlobStore);
  t.ok((await stat(join(baseDir, 'blobs'))).isDirectory());
  await store.put('nar/a.nar.zst', chunks('a'));
  t.equal((await stat(join(baseDir, 'blobs', 'nar', 'a.nar.zst'))).size, 1);
});

t.test('with s3.enable: the bucket from the s3.* options, checked at open', async (t) => {
  const s3 = await startTestS3(t);
  const dir = await tempDir(t);
  const secretFile = join(dir, 'secret');
  await writeFile(secretFile, 'S3RVER\n');
  const s3Options = {
    's3.enable': true,
    's3.endpoint': s3.endpoint,
    's3.bucket': s3.bucket,
    's3.prefix': 'kiln',
    's3.accessKeyId': 'S3RVER',
    's3.secretAccessKeyFile': secretFile,
  };
  const store = await openBlobStore(configWith(s3Options));
  t.teardown(() => store.close());
  t.equal(store.backend, 's3');
  t.ok(store instanceof S3BlobStore && store.prefix === 'kiln/' && store.bucket === s3.bucket);
  await store.put('nar/a.nar.zst', chunks('a'));
  t.same(await store.stat('nar/a.nar.zst'), { size: 1 });

  await t.rejects(openBlobStore(configWith({ ...s3Options, 's3.bucket': 'other' })), /S3 bucket other at http:\/\/127\.0\.0\.1:\d+\/? does not exist/);
});
