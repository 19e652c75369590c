// The S3-compatible server for tests outside test/storage/blobs (s3rver, started per test).
export { startS3rver, type TestS3 } from '../storage/blobs/s3rverServer.js';
