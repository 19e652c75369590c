// The S3 test server's front on its own: it must refuse what S3 refuses (a bad or replayed-and-altered
// signature, an unknown key, a skewed clock, an expired URL) and keep multipart uploads as S3 does.
// Requests are made by the AWS SDK itself; the tampered ones are the SDK's signed requests, captured
// and re-sent with one thing changed, so each refusal is down to that change.
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  HeadBucketCommand,
  ListMultipartUploadsCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { FinalizeHandler, FinalizeHandlerArguments, HttpRequest, MetadataBearer } from '@smithy/types';
import { createHash } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import t, { type Test } from 'tap';
import { startTestS3, TEST_S3_ACCESS_KEY_ID, TEST_S3_REGION, TEST_S3_SECRET, type TestS3 } from '../s3.js';

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

function clientOf(t: Test, s3: TestS3, credentials = { accessKeyId: TEST_S3_ACCESS_KEY_ID, secretAccessKey: TEST_S3_SECRET }, region = TEST_S3_REGION): S3Client {
  const client = new S3Client({ region, endpoint: s3.endpoint, forcePathStyle: true, credentials, maxAttempts: 1 });
  t.teardown(() => client.destroy());
  return client;
}

/** A client that keeps each request as signed and sent. */
function recordingClient(t: Test, s3: TestS3): { client: S3Client; sent: HttpRequest[] } {
  const client = clientOf(t, s3);
  const sent: HttpRequest[] = [];
  client.middlewareStack.addRelativeTo(<Output extends MetadataBearer>(next: FinalizeHandler<object, Output>) => async (args: FinalizeHandlerArguments<object>) => {
    sent.push(args.request as HttpRequest);
    return next(args);
  }, { relation: 'after', toMiddleware: 'httpSigningMiddleware', name: 'recordSignedRequest' });
  return { client, sent };
}

/** Sends a captured request again, as raw HTTP, with whatever the test changed in it. */
function send(s3: TestS3, request: { method: string; path: string; query?: HttpRequest['query']; headers: Record<string, string>; body?: unknown }): Promise<Answer> {
  const query = Object.entries(request.query ?? {}).flatMap(([name, value]) =>
    (Array.isArray(value) ? value : [value ?? '']).map((v) => `${encodeURIComponent(name)}=${encodeURIComponent(v)}`));
  const body = request.body === undefined ? undefined : Buffer.from(request.body as string | Uint8Array);
  const { port } = new URL(s3.endpoint);
  return new Promise((resolve, reject) => {
    const outgoing = httpRequest({ host: '127.0.0.1', port, method: request.method, path: request.path + (query.length > 0 ? `?${query.join('&')}` : ''), headers: request.headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks).toString() }));
    });
    outgoing.on('error', reject);
    outgoing.end(body);
  });
}

function last<T>(list: T[]): T {
  const item = list.at(-1);
  if (item === undefined) throw new Error('nothing was sent');
  return item;
}

function tamperHex(hex: string): string {
  return (hex[0] === '0' ? '1' : '0') + hex.slice(1);
}

/** S3's refusal: the status, an XML <Error> with the code, and S3's request-id headers. */
function isS3Error(t: Test, answer: Answer, status: number, code: string): void {
  t.equal(answer.status, status, `${code}: status`);
  t.match(answer.body, new RegExp(`^<\\?xml version="1.0" encoding="UTF-8"\\?>\\n<Error><Code>${code}</Code><Message>[^<]+</Message>`), `${code}: body`);
  t.match(answer.headers['content-type'], 'application/xml');
  t.match(answer.headers['x-amz-request-id'], /^[0-9A-F]{16}$/);
  t.type(answer.headers['x-amz-id-2'], 'string');
}

t.test('a captured PutObject is accepted as sent, and refused once anything signed changes', async (t) => {
  const s3 = await startTestS3(t);
  const { client, sent } = recordingClient(t, s3);
  await client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: 'nar/signed', Body: 'the signed body' }));
  const put = last(sent);
  const headers = { ...put.headers };
  const original = { method: put.method, path: put.path, query: put.query, headers, body: put.body };
  t.match(headers['x-amz-content-sha256'], /^[0-9a-f]{64}$/, 'the SDK signed the body');

  t.equal((await send(s3, original)).status, 200, 'the same request again is accepted (S3 allows a replay within 15 minutes)');

  const signature = /Signature=([0-9a-f]{64})$/.exec(headers.authorization!)![1]!;
  isS3Error(t, await send(s3, { ...original, headers: { ...headers, authorization: headers.authorization!.replace(signature, tamperHex(signature)) } }), 403, 'SignatureDoesNotMatch');
  isS3Error(t, await send(s3, { ...original, path: '/kiln/nar/other' }), 403, 'SignatureDoesNotMatch');
  const date = headers['x-amz-date']!;
  isS3Error(t, await send(s3, { ...original, headers: { ...headers, 'x-amz-date': date.replace(/\d(Z)$/, (d) => `${(Number(d[0]) + 1) % 10}Z`) } }), 403, 'SignatureDoesNotMatch');

  const forged = 'a forged body!!';
  t.equal(forged.length, 'the signed body'.length);
  isS3Error(t, await send(s3, { ...original, body: forged }), 400, 'XAmzContentSHA256Mismatch');
  const forgedHash = createHash('sha256').update(forged).digest('hex');
  isS3Error(t, await send(s3, { ...original, body: forged, headers: { ...headers, 'x-amz-content-sha256': forgedHash } }), 403, 'SignatureDoesNotMatch');

  const stored = await client.send(new GetObjectCommand({ Bucket: s3.bucket, Key: 'nar/signed' }));
  t.equal(await stored.Body!.transformToString(), 'the signed body', 'no refused request stored anything');
  const other = await client.send(new GetObjectCommand({ Bucket: s3.bucket, Key: 'nar/other' })).catch((e: { name: string }) => e.name);
  t.equal(other, 'NoSuchKey');
});

t.test('a wrong secret, an unknown key, no signature, another region, a skewed clock', async (t) => {
  let skewMs = 0;
  const s3 = await startTestS3(t, { now: () => new Date(Date.now() + skewMs) });
  const refusal = (client: S3Client) => client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: 'nar/x', Body: 'x' })).then(
    () => 'accepted',
    (e: { name: string; $metadata: { httpStatusCode?: number } }) => `${e.$metadata.httpStatusCode} ${e.name}`,
  );
  t.equal(await refusal(clientOf(t, s3)), 'accepted');
  t.equal(await refusal(clientOf(t, s3, { accessKeyId: TEST_S3_ACCESS_KEY_ID, secretAccessKey: 'not-the-secret' })), '403 SignatureDoesNotMatch');
  t.equal(await refusal(clientOf(t, s3, { accessKeyId: 'NOBODY', secretAccessKey: TEST_S3_SECRET })), '403 InvalidAccessKeyId');
  t.equal(await refusal(clientOf(t, s3, undefined, 'eu-west-1')), '400 AuthorizationHeaderMalformed');
  skewMs = 16 * 60_000;
  t.equal(await refusal(clientOf(t, s3)), '403 RequestTimeTooSkewed');
  skewMs = 0;

  isS3Error(t, await send(s3, { method: 'GET', path: `/${s3.bucket}/nar/x`, headers: {} }), 403, 'AccessDenied');
  const head = await send(s3, { method: 'HEAD', path: `/${s3.bucket}`, headers: {} });
  t.same({ status: head.status, body: head.body }, { status: 403, body: '' }, 'a refused HEAD has no body, as S3 sends it');
  t.match(head.headers['x-amz-request-id'], /^[0-9A-F]{16}$/);
  const headBucket = await clientOf(t, s3, { accessKeyId: TEST_S3_ACCESS_KEY_ID, secretAccessKey: 'wrong' }).send(new HeadBucketCommand({ Bucket: s3.bucket })).catch((e: { $metadata: { httpStatusCode?: number } }) => e.$metadata.httpStatusCode);
  t.equal(headBucket, 403);
});

t.test('presigned URLs: valid until they expire, refused when altered', async (t) => {
  let aheadMs = 0;
  const s3 = await startTestS3(t, { now: () => new Date(Date.now() + aheadMs) });
  const client = clientOf(t, s3);
  await client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: 'nar/shared', Body: 'shared bytes' }));
  await client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: 'nar/private', Body: 'private bytes' }));
  const url = await getSignedUrl(client, new GetObjectCommand({ Bucket: s3.bucket, Key: 'nar/shared' }), { expiresIn: 300 });
  const fetched = await fetch(url);
  t.equal(fetched.status, 200);
  t.equal(await fetched.text(), 'shared bytes');

  const refused = async (target: string, code: string): Promise<void> => {
    const response = await fetch(target);
    isS3Error(t, { status: response.status, headers: Object.fromEntries(response.headers), body: await response.text() }, 403, code);
  };
  const signature = new URL(url).searchParams.get('X-Amz-Signature')!;
  await refused(url.replace(signature, tamperHex(signature)), 'SignatureDoesNotMatch');
  await refused(url.replace('/nar/shared?', '/nar/private?'), 'SignatureDoesNotMatch');
  await refused(url.replace('X-Amz-Expires=300', 'X-Amz-Expires=600'), 'SignatureDoesNotMatch');
  const wrongSecret = await getSignedUrl(clientOf(t, s3, { accessKeyId: TEST_S3_ACCESS_KEY_ID, secretAccessKey: 'wrong' }), new GetObjectCommand({ Bucket: s3.bucket, Key: 'nar/shared' }), { expiresIn: 300 });
  await refused(wrongSecret, 'SignatureDoesNotMatch');
  aheadMs = 301_000;
  await refused(url, 'AccessDenied');
});

t.test('multipart uploads: completed only from listed parts in order, of 5 MiB but the last', async (t) => {
  const s3 = await startTestS3(t);
  const client = clientOf(t, s3);
  const MiB = 1024 * 1024;
  const start = async (Key: string) => (await client.send(new CreateMultipartUploadCommand({ Bucket: s3.bucket, Key }))).UploadId!;
  const part = async (Key: string, UploadId: string, PartNumber: number, bytes: number, fill: number) =>
    (await client.send(new UploadPartCommand({ Bucket: s3.bucket, Key, UploadId, PartNumber, Body: Buffer.alloc(bytes, fill) }))).ETag!;
  const complete = (Key: string, UploadId: string, Parts: { PartNumber: number; ETag: string }[]) =>
    client.send(new CompleteMultipartUploadCommand({ Bucket: s3.bucket, Key, UploadId, MultipartUpload: { Parts } })).then(
      (done) => done.ETag,
      (e: { name: string; $metadata: { httpStatusCode?: number } }) => `${e.$metadata.httpStatusCode} ${e.name}`,
    );

  const id = await start('nar/multi');
  const first = await part('nar/multi', id, 1, 5 * MiB, 1);
  const second = await part('nar/multi', id, 2, 10, 2);
  const small = await part('nar/multi', id, 3, 10, 3);
  t.equal(await complete('nar/multi', id, [{ PartNumber: 2, ETag: second }, { PartNumber: 1, ETag: first }]), '400 InvalidPartOrder');
  t.equal(await complete('nar/multi', id, [{ PartNumber: 1, ETag: second }, { PartNumber: 2, ETag: second }]), '400 InvalidPart');
  t.equal(await complete('nar/multi', id, [{ PartNumber: 2, ETag: second }, { PartNumber: 3, ETag: small }]), '400 EntityTooSmall');
  t.equal(await client.send(new HeadBucketCommand({ Bucket: s3.bucket })).then(() => 'ok'), 'ok');
  t.notOk(await client.send(new GetObjectCommand({ Bucket: s3.bucket, Key: 'nar/multi' })).then(() => true, () => false), 'no object before Complete');
  t.match(await complete('nar/multi', id, [{ PartNumber: 1, ETag: first }, { PartNumber: 2, ETag: second }]), /^"[0-9a-f]{32}-2"$/, 'S3\'s multipart ETag');
  const object = await client.send(new GetObjectCommand({ Bucket: s3.bucket, Key: 'nar/multi' }));
  const bytes = Buffer.from(await object.Body!.transformToByteArray());
  t.equal(bytes.length, 5 * MiB + 10);
  t.same([bytes[0], bytes[5 * MiB - 1], bytes[5 * MiB], bytes.at(-1)], [1, 1, 2, 2], 'parts 1 and 2, part 3 left out');
  t.equal(s3.front.partCount(), 0, 'completing frees the parts');
  t.equal(await complete('nar/multi', id, [{ PartNumber: 1, ETag: first }]), '404 NoSuchUpload', 'a completed upload is gone');

  const abandoned = await start('nar/abandoned');
  await part('nar/abandoned', abandoned, 1, 10, 1);
  t.equal(s3.front.partCount(), 1);
  await client.send(new AbortMultipartUploadCommand({ Bucket: s3.bucket, Key: 'nar/abandoned', UploadId: abandoned }));
  t.equal(s3.front.partCount(), 0, 'an abort frees the parts');
  t.equal(await part('nar/abandoned', abandoned, 2, 10, 1).catch((e: { name: string }) => e.name), 'NoSuchUpload');
  const listed = await client.send(new ListMultipartUploadsCommand({ Bucket: s3.bucket }));
  t.same(listed.Uploads ?? [], [], 'nothing left to list');
});

t.test('ListMultipartUploads pages by key, then upload ID, and filters by prefix', async (t) => {
  const s3 = await startTestS3(t);
  const client = clientOf(t, s3);
  const ids: string[] = [];
  for (const Key of ['b', 'a', 'a', 'c/1', 'c/2', 'd']) {
    ids.push((await client.send(new CreateMultipartUploadCommand({ Bucket: s3.bucket, Key }))).UploadId!);
  }
  const page1 = await client.send(new ListMultipartUploadsCommand({ Bucket: s3.bucket, MaxUploads: 2 }));
  t.same(page1.Uploads?.map((u) => [u.Key, u.UploadId]), [['a', ids[1]], ['a', ids[2]]]);
  t.same([page1.IsTruncated, page1.NextKeyMarker, page1.NextUploadIdMarker, page1.MaxUploads], [true, 'a', ids[2], 2]);
  t.ok(page1.Uploads!.every((u) => u.Initiated instanceof Date && u.StorageClass === 'STANDARD'));
  const page2 = await client.send(new ListMultipartUploadsCommand({ Bucket: s3.bucket, MaxUploads: 2, KeyMarker: 'a', UploadIdMarker: ids[1] }));
  t.same(page2.Uploads?.map((u) => u.UploadId), [ids[2], ids[0]], 'after the marker within key a, then b');
  const keyOnly = await client.send(new ListMultipartUploadsCommand({ Bucket: s3.bucket, KeyMarker: 'a' }));
  t.same(keyOnly.Uploads?.map((u) => u.Key), ['b', 'c/1', 'c/2', 'd'], 'a key marker alone skips that key');
  t.equal(keyOnly.IsTruncated, false);
  const prefixed = await client.send(new ListMultipartUploadsCommand({ Bucket: s3.bucket, Prefix: 'c/' }));
  t.same(prefixed.Uploads?.map((u) => u.Key), ['c/1', 'c/2']);
  t.equal(prefixed.Prefix, 'c/');
  const missing = await clientOf(t, s3).send(new ListMultipartUploadsCommand({ Bucket: 'nope' })).catch((e: { name: string }) => e.name);
  t.equal(missing, 'NoSuchBucket');
});
