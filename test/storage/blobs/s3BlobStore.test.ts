// The S3 backend against the test's S3 server: s3rver behind a front that verifies signatures as S3 does.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateMultipartUploadCommand, ListMultipartUploadsCommand, S3Client, UploadPartCommand } from '@aws-sdk/client-s3';
import t, { type Test } from 'tap';
import { S3BlobStore, type S3BlobStoreOptions } from '../../../storage/blobs/s3BlobStore.js';
import { chunks, readAll } from './blobContent.js';
import { blobStoreBehaviour } from './blobStoreBehaviour.js';
import { startTestS3 } from '../../support/s3.js';

function openStore(t: Test, options: S3BlobStoreOptions): S3BlobStore {
  const store = new S3BlobStore(options);
  t.teardown(() => store.close());
  return store;
}

async function secretFile(t: Test, secret: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'kiln-s3-secret-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'secret'), secret);
  return join(dir, 'secret');
}

async function keysOf(store: S3BlobStore, prefix = ''): Promise<string[]> {
  const keys: string[] = [];
  for await (const entry of store.list(prefix)) keys.push(entry.key);
  return keys.sort();
}

/** A port nothing listens on: bound, then released. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

t.test('the shared behaviour', async (t) => {
  const s3 = await startTestS3(t);
  const staging = await mkdtemp(join(tmpdir(), 'kiln-s3-staging-'));
  t.teardown(() => rm(staging, { recursive: true, force: true }));
  const store = openStore(t, s3.options({ prefix: 'behaviour' }));
  await store.checkAccess();
  blobStoreBehaviour(t, { store, stagingDir: staging });
});

t.test('the prefix places objects in the bucket and hides itself from keys', async (t) => {
  const s3 = await startTestS3(t);
  const prefixed = openStore(t, s3.options({ prefix: '/kiln/cache/' }));
  const whole = openStore(t, s3.options({ prefix: '' }));
  t.equal(prefixed.backend, 's3');
  t.equal(prefixed.prefix, 'kiln/cache/');
  await prefixed.put('nar/a.nar.zst', chunks('a'));
  t.same(await keysOf(prefixed), ['nar/a.nar.zst']);
  t.same(await keysOf(whole), ['kiln/cache/nar/a.nar.zst']);
  t.equal((await readAll((await whole.get('kiln/cache/nar/a.nar.zst'))!.body)).toString(), 'a');
  t.equal(await prefixed.stat('kiln/cache/nar/a.nar.zst'), null);
  t.match(await prefixed.presignedUrl('nar/a.nar.zst', 60), /\/kiln\/kiln\/cache\/nar\/a\.nar\.zst\?/);
  t.equal(prefixed.localPath('nar/a.nar.zst'), null, 'no local file: serving threads leave S3 NARs to the main thread');
  t.throws(() => new S3BlobStore(s3.options({ prefix: 'a/../b' })), /s3\.prefix "a\/\.\.\/b" must not contain "\." or "\.\." segments/);
});

t.test('checkAccess names the bucket and the endpoint', async (t) => {
  const s3 = await startTestS3(t);
  await t.rejects(openStore(t, s3.options({ bucket: 'missing' })).checkAccess(), {
    message: `S3 bucket missing at ${s3.endpoint} does not exist; check s3.endpoint, s3.bucket and the credentials`,
  });
  await t.rejects(openStore(t, s3.options({ accessKeyId: 'NOT-AN-ACCOUNT' })).checkAccess(), /refuses these credentials/);
  // The test server's front verifies each signature, so a wrong secret is refused as S3 refuses it.
  const wrongSecret = s3.options({ secretAccessKeyFile: await secretFile(t, 'not-the-secret') });
  await t.rejects(openStore(t, wrongSecret).checkAccess(), /refuses these credentials/);
  await t.rejects(openStore(t, wrongSecret).put('nar/a', chunks('a')), { name: 'SignatureDoesNotMatch' });
});

t.test('credentials come as a pair', async (t) => {
  const s3 = await startTestS3(t);
  t.throws(() => new S3BlobStore(s3.options({ secretAccessKeyFile: null })), /s3\.accessKeyId and s3\.secretAccessKeyFile go together/);
  t.throws(() => new S3BlobStore(s3.options({ accessKeyId: null })), /go together/);
  t.throws(() => new S3BlobStore(s3.options({ secretAccessKeyFile: '/nonexistent/kiln-secret' })), /cannot read secret file \/nonexistent\/kiln-secret/);
  t.throws(() => new S3BlobStore(s3.options({ bucket: '' })), /s3\.bucket must be set/);
});

t.test('presigned URL lifetimes are checked', async (t) => {
  const s3 = await startTestS3(t);
  const store = openStore(t, s3.options());
  await t.rejects(store.presignedUrl('nar/a', 0), /must be a whole number of seconds from 1 to 604800/);
  await t.rejects(store.presignedUrl('nar/a', 8 * 24 * 3600), /7 days/);
});

t.test('s3.maxRetries and s3.retryTimeoutSecs bound the attempts', async (t) => {
  const endpoint = `http://127.0.0.1:${await closedPort()}`;
  const secretAccessKeyFile = await secretFile(t, 'secret');
  const base = { bucket: 'kiln', prefix: '', endpoint, region: 'us-east-1', virtualHostedStyle: false, accessKeyId: 'id', secretAccessKeyFile, readTimeoutSecs: 5 };
  const attemptsOf = async (options: S3BlobStoreOptions, run: (store: S3BlobStore) => Promise<unknown>) => {
    const error = await run(openStore(t, options)).then(() => undefined, (e: unknown) => e as { code?: string; $metadata?: { attempts?: number } });
    t.equal(error?.code, 'ECONNREFUSED');
    return error?.$metadata?.attempts;
  };
  t.equal(await attemptsOf({ ...base, maxRetries: 2, retryTimeoutSecs: 60 }, (s) => s.stat('nar/a')), 3, 'two retries');
  t.equal(await attemptsOf({ ...base, maxRetries: 0, retryTimeoutSecs: 60 }, (s) => s.stat('nar/a')), 1, 'none');
  t.equal(await attemptsOf({ ...base, maxRetries: 5, retryTimeoutSecs: 0 }, (s) => s.stat('nar/a')), 1, 'the retry window already closed');
});

t.test('s3.readTimeoutSecs fails a request whose server stalls', async (t) => {
  const sockets = new Set<Socket>();
  const silent = createServer((socket) => sockets.add(socket)); // accepts, reads, never answers
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const socket of sockets) socket.destroy();
    silent.close();
  });
  const address = silent.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  const secretAccessKeyFile = await secretFile(t, 'secret');
  const store = openStore(t, {
    bucket: 'kiln', prefix: '', endpoint: `http://127.0.0.1:${address.port}`, region: 'us-east-1', virtualHostedStyle: false,
    accessKeyId: 'id', secretAccessKeyFile, maxRetries: 0, readTimeoutSecs: 1, retryTimeoutSecs: 60,
  });
  await t.rejects(store.stat('nar/a'), { name: 'TimeoutError', message: /timed out after 1000 ms of inactivity/ });
});

t.test('sweepPartial aborts this store\'s uploads older than the cut-off, across pages, and no others', async (t) => {
  let serverSkewMs = -10 * 60_000; // within S3's 15-minute skew: the SDK signs with the real clock
  const s3 = await startTestS3(t, { now: () => new Date(Date.now() + serverSkewMs), maxUploads: 2 });
  const client = new S3Client({ region: 'us-east-1', endpoint: s3.endpoint, forcePathStyle: true, credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' } });
  t.teardown(() => client.destroy());
  const started = async (Key: string): Promise<string> => {
    const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: s3.bucket, Key }));
    await client.send(new UploadPartCommand({ Bucket: s3.bucket, Key, UploadId, PartNumber: 1, Body: 'a part' }));
    return UploadId!;
  };
  const old = [await started('kiln/nar/a.nar.zst'), await started('kiln/nar/a.nar.zst'), await started('kiln/nar/b.nar.zst')];
  // 'elsewhere/…' cut by the prefix's length reads as a valid key: only the listing's Prefix keeps it out.
  const notOurs = [await started('kiln/nar/not a key'), await started('elsewhere/nar/c.nar.zst')];
  serverSkewMs = 0;
  const young = await started('kiln/nar/d.nar.zst');

  const store = openStore(t, s3.options({ prefix: 'kiln' }));
  t.equal(await store.sweepPartial(new Date(Date.now() - 5 * 60_000)), 3, 'the three old uploads under the prefix');
  t.equal(s3.front.partCount(), 3, 'their parts are freed');
  const left: string[] = [];
  let markers: { KeyMarker?: string; UploadIdMarker?: string } = {};
  for (let page = 0; page < 10; page++) {
    const listed = await client.send(new ListMultipartUploadsCommand({ Bucket: s3.bucket, ...markers }));
    left.push(...(listed.Uploads ?? []).map((upload) => upload.UploadId!));
    if (!listed.IsTruncated) break;
    markers = { KeyMarker: listed.NextKeyMarker!, UploadIdMarker: listed.NextUploadIdMarker! };
  }
  t.same(left.sort(), [...notOurs, young].sort(), 'another key, another prefix and the young upload stay');
  for (const UploadId of old) {
    const part = client.send(new UploadPartCommand({ Bucket: s3.bucket, Key: 'kiln/nar/a.nar.zst', UploadId, PartNumber: 2, Body: 'late' }));
    await t.rejects(part, { name: 'NoSuchUpload' });
  }
  t.equal(await store.sweepPartial(new Date(Date.now() - 5 * 60_000)), 0, 'nothing more to sweep');
});
