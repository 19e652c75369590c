// Multipart uploads as S3 keeps them, which s3rver cannot (it has no AbortMultipartUpload and no
// ListMultipartUploads): parts wait in the front's own directory, invisible, until Complete
// checks them (order, ETags, 5 MiB minimum but for the last) and joins them into one object
// file, or Abort drops them. Upload IDs sort in the order uploads were initiated.
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { ReceivedBody } from './requestBody.js';
import { S3Error, invalidArgument, noSuchUpload } from './s3Errors.js';

export interface Upload {
  bucket: string;
  key: string;
  uploadId: string;
  initiated: Date;
  parts: Map<number, { file: string; size: number; md5: string }>;
}

export interface CompletedPart {
  partNumber: number;
  etag: string;
}

const MIN_PART_BYTES = 5 * 1024 * 1024;
const MAX_PART_NUMBER = 10_000;

export class MultipartUploads {
  private readonly uploads = new Map<string, Upload>();
  private created = 0;

  constructor(
    private readonly dir: string,
    private readonly now: () => Date,
  ) {}

  async create(bucket: string, key: string): Promise<Upload> {
    // A counter first, so that IDs sort by initiation, as S3 lists the uploads of one key.
    const uploadId = `${(this.created++).toString(36).padStart(8, '0')}${randomBytes(24).toString('base64url')}`;
    const upload: Upload = { bucket, key, uploadId, initiated: this.now(), parts: new Map() };
    await mkdir(join(this.dir, uploadId), { recursive: true });
    this.uploads.set(uploadId, upload);
    return upload;
  }

  /** The upload, when it exists for this bucket and key. */
  get(bucket: string, key: string, uploadId: string): Upload {
    const upload = this.uploads.get(uploadId);
    if (upload === undefined || upload.bucket !== bucket || upload.key !== key) throw noSuchUpload(uploadId);
    return upload;
  }

  /** Takes over the received body as the part; returns its ETag (quoted MD5, as S3 gives it). */
  async putPart(upload: Upload, partNumberText: string, body: ReceivedBody): Promise<string> {
    const partNumber = Number(partNumberText);
    if (!/^\d+$/.test(partNumberText) || partNumber < 1 || partNumber > MAX_PART_NUMBER) {
      throw invalidArgument(`Part number must be an integer between 1 and ${MAX_PART_NUMBER}, inclusive`, 'partNumber', partNumberText);
    }
    const file = join(this.dir, upload.uploadId, String(partNumber));
    await rename(body.file, file);
    upload.parts.set(partNumber, { file, size: body.size, md5: body.md5 });
    return `"${body.md5}"`;
  }

  /** Joins the listed parts into one file and ends the upload; the caller stores the file as the object. */
  async complete(upload: Upload, listed: CompletedPart[]): Promise<{ file: string; etag: string }> {
    if (listed.some((part, index) => index > 0 && part.partNumber <= listed[index - 1]!.partNumber)) {
      throw new S3Error(400, 'InvalidPartOrder', 'The list of parts was not in ascending order. Parts must be ordered by part number.', { UploadId: upload.uploadId });
    }
    const chosen = listed.map((part, index) => {
      const stored = upload.parts.get(part.partNumber);
      if (stored === undefined || part.etag.replace(/"/g, '') !== stored.md5) {
        throw new S3Error(400, 'InvalidPart', 'One or more of the specified parts could not be found.  The part may not have been uploaded, or the specified entity tag may not match the part\'s entity tag.', {
          UploadId: upload.uploadId, PartNumber: part.partNumber, ETag: part.etag,
        });
      }
      if (index < listed.length - 1 && stored.size < MIN_PART_BYTES) {
        throw new S3Error(400, 'EntityTooSmall', 'Your proposed upload is smaller than the minimum allowed object size.', {
          ProposedSize: stored.size, MinSizeAllowed: MIN_PART_BYTES, PartNumber: part.partNumber, ETag: part.etag,
        });
      }
      return stored;
    });
    const file = join(this.dir, `${upload.uploadId}.object`);
    await pipeline(async function* () {
      for (const part of chosen) yield* createReadStream(part.file);
    }, createWriteStream(file));
    // S3's ETag of a multipart object: the MD5 of the parts' binary MD5s, and the number of parts.
    const md5 = createHash('md5');
    for (const part of chosen) md5.update(Buffer.from(part.md5, 'hex'));
    await this.drop(upload);
    return { file, etag: `"${md5.digest('hex')}-${chosen.length}"` };
  }

  async abort(upload: Upload): Promise<void> {
    await this.drop(upload);
  }

  /** The bucket's uploads in S3's listing order: by key, then by initiation. */
  inBucket(bucket: string): Upload[] {
    return [...this.uploads.values()]
      .filter((upload) => upload.bucket === bucket)
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.uploadId < b.uploadId ? -1 : 1));
  }

  /** How many part files the front holds: what an abort must free. */
  partCount(): number {
    let count = 0;
    for (const upload of this.uploads.values()) count += upload.parts.size;
    return count;
  }

  private async drop(upload: Upload): Promise<void> {
    this.uploads.delete(upload.uploadId);
    await rm(join(this.dir, upload.uploadId), { recursive: true, force: true });
  }
}
