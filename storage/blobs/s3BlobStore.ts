// Blobs as objects in one bucket under an optional prefix: key `nar/<hash>.nar.zst` is the object
// `<prefix>/nar/<hash>.nar.zst`. S3 makes an object visible only when its PutObject or
// CompleteMultipartUpload succeeds, so a failed put never shows a partial blob.
import {
  AbortMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { createReadStream } from 'node:fs';
import { stat, unlink } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { assertBlobKey, assertBlobPrefix, blobKeyProblem } from './blobKey.js';
import { BlobRangeError, assertRangeShape, type BlobRange } from './blobRange.js';
import type { BlobEntry, BlobRead, BlobSource, BlobStore } from './blobStore.js';
import { BlobSizeError, assertSize, withExpectedSize } from './expectedSize.js';
import { createS3Client, type S3ConnectionOptions } from './s3Client.js';
import { fitToRange } from './s3ContentRange.js';
import { s3ErrorStatus, s3ObjectMissing } from './s3Errors.js';
import type { S3RetryPolicy } from './s3RetryPolicy.js';

export interface S3BlobStoreOptions extends S3ConnectionOptions {
  bucket: string;
  /** '' stores at the bucket's root; slashes around it are optional */
  prefix: string;
}

// PutObject takes at most 5 GiB; a larger staging file goes up in parts.
const MAX_PUT_OBJECT_BYTES = 5 * 1024 ** 3;
// S3 refuses presigned URLs valid longer than 7 days.
const MAX_PRESIGN_SECS = 7 * 24 * 3600;

export class S3BlobStore implements BlobStore {
  readonly backend = 's3' as const;
  readonly bucket: string;
  readonly prefix: string;
  private readonly client: S3Client;
  private readonly retries: S3RetryPolicy;
  private readonly where: string;

  constructor(options: S3BlobStoreOptions) {
    if (options.bucket === '') throw new Error('s3.bucket must be set to store blobs in S3');
    this.bucket = options.bucket;
    this.prefix = normalizePrefix(options.prefix);
    this.where = `bucket ${options.bucket} at ${options.endpoint ?? 'AWS'}`;
    ({ client: this.client, retries: this.retries } = createS3Client(options));
  }

  private objectKey(key: string): string {
    assertBlobKey(key);
    return this.prefix + key;
  }

  /** Fails with a message naming the bucket and endpoint when the bucket is missing or not ours to use. */
  async checkAccess(): Promise<void> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }));
    } catch (error) {
      const status = s3ErrorStatus(error);
      const reason = status === 404 ? 'does not exist' : status === 403 ? 'refuses these credentials' : 'cannot be reached';
      throw new Error(`S3 ${this.where} ${reason}; check s3.endpoint, s3.bucket and the credentials`, { cause: error });
    }
  }

  async put(key: string, source: BlobSource, size?: number): Promise<void> {
    const Key = this.objectKey(key);
    assertSize(size);
    if (typeof source === 'string') {
      await this.putFile(key, Key, source, size);
      await unlink(source);
      return;
    }
    // Upload buffers up to 4 parts of 5 MiB; each part (or the single PutObject of a small blob) is retried by the SDK.
    const failure: { of?: unknown } = {};
    const Body = Readable.from(recordingFailure(withExpectedSize(key, source, size), failure), { objectMode: false });
    const params = size === undefined ? { Bucket: this.bucket, Key, Body } : { Bucket: this.bucket, Key, Body, ContentLength: size };
    try {
      await new Upload({ client: this.client, params }).done();
    } catch (error) {
      // When the source fails, Upload aborts the multipart upload first; if that abort fails too, its
      // error would hide the cause. The caller needs the source's error; the parts left are swept later.
      throw 'of' in failure ? failure.of : error;
    }
  }

  private async putFile(key: string, Key: string, file: string, size: number | undefined): Promise<void> {
    const actual = (await stat(file)).size;
    if (size !== undefined && actual !== size) throw new BlobSizeError(key, size, actual, true);
    if (actual > MAX_PUT_OBJECT_BYTES) {
      const params = { Bucket: this.bucket, Key, Body: createReadStream(file), ContentLength: actual };
      await new Upload({ client: this.client, params }).done();
      return;
    }
    // A single streamed PutObject keeps memory flat; the SDK will not retry a stream body, so the policy reopens the file.
    await this.retries.run(async () => {
      const Body = createReadStream(file);
      try {
        await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key, Body, ContentLength: actual }));
      } finally {
        Body.destroy();
      }
    });
  }

  async get(key: string, range?: BlobRange): Promise<BlobRead | null> {
    const Key = this.objectKey(key);
    if (range !== undefined) assertRangeShape(range);
    let response;
    try {
      const command = new GetObjectCommand({ Bucket: this.bucket, Key, ...(range && { Range: `bytes=${range.start}-${range.end}` }) });
      response = await this.client.send(command);
    } catch (error) {
      if (s3ObjectMissing(error)) return null;
      if (range !== undefined && s3ErrorStatus(error) === 416) {
        const found = await this.stat(key);
        if (found === null) return null;
        throw new BlobRangeError(key, range, found.size);
      }
      throw error;
    }
    const body = response.Body;
    if (!(body instanceof Readable)) throw new Error(`S3 ${this.where} returned no readable body for ${Key}`);
    if (range === undefined) return { size: response.ContentLength ?? 0, range: null, body, cancel: () => body.destroy() };
    try {
      return { ...fitToRange(key, range, response.ContentRange, body), cancel: () => body.destroy() };
    } catch (error) {
      body.destroy();
      throw error;
    }
  }

  async stat(key: string): Promise<{ size: number } | null> {
    const Key = this.objectKey(key);
    try {
      const head = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key }));
      return { size: head.ContentLength ?? 0 };
    } catch (error) {
      if (s3ObjectMissing(error)) return null;
      throw error;
    }
  }

  async delete(key: string): Promise<void> {
    const Key = this.objectKey(key);
    try {
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key }));
    } catch (error) {
      if (!s3ObjectMissing(error)) throw error;
    }
  }

  async *list(prefix = ''): AsyncIterable<BlobEntry> {
    assertBlobPrefix(prefix);
    let ContinuationToken: string | undefined;
    do {
      const page = await this.client.send(
        new ListObjectsV2Command({ Bucket: this.bucket, Prefix: this.prefix + prefix, ...(ContinuationToken && { ContinuationToken }) }),
      );
      for (const object of page.Contents ?? []) {
        const key = object.Key?.slice(this.prefix.length);
        // Objects that are not valid keys were not written through this interface; they are not ours to report.
        if (key === undefined || blobKeyProblem(key) !== undefined) continue;
        yield { key, size: object.Size ?? 0, modified: object.LastModified ?? new Date(0) };
      }
      ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (ContinuationToken !== undefined);
  }

  async presignedUrl(key: string, expiresSecs: number): Promise<string> {
    const Key = this.objectKey(key);
    if (!Number.isSafeInteger(expiresSecs) || expiresSecs < 1 || expiresSecs > MAX_PRESIGN_SECS) {
      throw new Error(`presigned URL lifetime ${expiresSecs}: must be a whole number of seconds from 1 to ${MAX_PRESIGN_SECS} (7 days)`);
    }
    return getSignedUrl(this.client, new GetObjectCommand({ Bucket: this.bucket, Key }), { expiresIn: expiresSecs });
  }

  localPath(key: string): null {
    this.objectKey(key);
    return null;
  }

  /** Aborts multipart uploads a crashed process left behind; they are invisible but S3 bills their parts. */
  async sweepPartial(olderThan: Date): Promise<number> {
    let aborted = 0;
    let markers: { KeyMarker?: string; UploadIdMarker?: string } = {};
    for (;;) {
      const page = await this.client.send(new ListMultipartUploadsCommand({ Bucket: this.bucket, Prefix: this.prefix, ...markers }));
      for (const upload of page.Uploads ?? []) {
        if (upload.Key === undefined || upload.UploadId === undefined || (upload.Initiated ?? olderThan) >= olderThan) continue;
        if (blobKeyProblem(upload.Key.slice(this.prefix.length)) !== undefined) continue; // someone else's upload
        await this.client.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: upload.Key, UploadId: upload.UploadId }));
        aborted++;
      }
      if (!page.IsTruncated) return aborted;
      markers = { ...(page.NextKeyMarker && { KeyMarker: page.NextKeyMarker }), ...(page.NextUploadIdMarker && { UploadIdMarker: page.NextUploadIdMarker }) };
    }
  }

  async close(): Promise<void> {
    this.client.destroy();
  }
}

async function* recordingFailure(source: AsyncIterable<Uint8Array>, failure: { of?: unknown }): AsyncGenerator<Uint8Array> {
  try {
    yield* source;
  } catch (error) {
    failure.of = error;
    throw error;
  }
}

function normalizePrefix(prefix: string): string {
  const trimmed = prefix.replace(/^\/+|\/+$/g, '');
  if (trimmed === '') return '';
  const problem = blobKeyProblem(trimmed);
  if (problem !== undefined) throw new Error(`s3.prefix ${JSON.stringify(prefix)} ${problem}`);
  return `${trimmed}/`;
}
