// The public face of storage/blobs/: what other folders import from it (DESIGN.md, Layout).
export type { BlobStore, BlobBackend, BlobSource, BlobRead, BlobReadOptions, BlobEntry } from './blobStore.js';
export { BlobKeyError, assertBlobKey, blobKeyProblem, MAX_BLOB_KEY_LENGTH } from './blobKey.js';
export { BlobRangeError } from './blobRange.js';
export type { BlobRange } from './blobRange.js';
export { BlobSizeError } from './expectedSize.js';
export { FilesystemBlobStore } from './filesystemBlobStore.js';
// S3BlobStore itself is loaded by openBlobStore only when s3.enable is set (the AWS SDK's weight)
export type { S3BlobStoreOptions } from './s3BlobStore.js';
export type { S3ConnectionOptions } from './s3Client.js';
export { openBlobStore, blobRoot } from './openBlobStore.js';
