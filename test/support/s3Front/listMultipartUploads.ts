// ListMultipartUploads (GET /{bucket}?uploads) on the wire: prefix, key-marker, upload-id-marker,
// max-uploads (1 to 1000) and encoding-type=url in; a ListMultipartUploadsResult page out, with
// NextKeyMarker/NextUploadIdMarker when truncated. Delimiter grouping is not implemented (kiln never asks).
import type { Upload } from './multipartUploads.js';
import { invalidArgument, notImplemented } from './s3Errors.js';
import { xmlDocument } from './s3Xml.js';

export const MAX_UPLOADS = 1000;

export function listMultipartUploads(bucket: string, uploads: Upload[], query: URLSearchParams, pageSize = MAX_UPLOADS): string {
  if (query.has('delimiter')) throw notImplemented('delimiter in ListMultipartUploads');
  const encodingType = query.get('encoding-type');
  if (encodingType !== null && encodingType !== 'url') throw invalidArgument('Invalid Encoding Method specified in Request', 'encoding-type', encodingType);
  const maxText = query.get('max-uploads');
  if (maxText !== null && !/^\d+$/.test(maxText)) throw invalidArgument('Provided max-uploads not an integer or within integer range', 'max-uploads', maxText);
  const maxUploads = Math.min(maxText === null ? pageSize : Number(maxText), pageSize);
  const prefix = query.get('prefix') ?? '';
  const keyMarker = query.get('key-marker') ?? '';
  // Without a key marker S3 ignores the upload-id marker.
  const uploadIdMarker = keyMarker === '' ? '' : (query.get('upload-id-marker') ?? '');

  const after = uploads.filter((upload) =>
    upload.key.startsWith(prefix) &&
    (keyMarker === '' || upload.key > keyMarker || (upload.key === keyMarker && uploadIdMarker !== '' && upload.uploadId > uploadIdMarker)));
  const page = after.slice(0, maxUploads);
  const truncated = after.length > page.length;
  const last = page.at(-1);
  const encode = (text: string): string => (encodingType === 'url' ? encodeURIComponent(text).replace(/%2F/g, '/') : text);
  const owner = { ID: 'kiln-test-owner', DisplayName: 'kiln-test' };
  return xmlDocument('ListMultipartUploadsResult', {
    Bucket: bucket,
    KeyMarker: encode(keyMarker),
    UploadIdMarker: uploadIdMarker,
    NextKeyMarker: truncated && last ? encode(last.key) : undefined,
    NextUploadIdMarker: truncated && last ? last.uploadId : undefined,
    EncodingType: encodingType ?? undefined,
    Prefix: encode(prefix),
    MaxUploads: maxUploads,
    IsTruncated: truncated,
    Upload: page.map((upload) => ({
      Key: encode(upload.key),
      UploadId: upload.uploadId,
      Initiator: owner,
      Owner: owner,
      StorageClass: 'STANDARD',
      Initiated: upload.initiated.toISOString(),
    })),
  });
}
