// One S3Client configured from the s3.* options (spec/configuration.md).
import { S3Client, type S3ClientConfig } from '@aws-sdk/client-s3';
import { readSecretFile } from '../../config/index.js';
import { S3RetryPolicy } from './s3RetryPolicy.js';

export interface S3ConnectionOptions {
  /** null: the original provider (AWS), addressed virtual-hosted style */
  endpoint: string | null;
  region: string;
  /** with a custom endpoint, `<bucket>.<endpoint>` instead of `<endpoint>/<bucket>` */
  virtualHostedStyle: boolean;
  /** with secretAccessKeyFile; both null uses the SDK's default chain (environment, instance role) */
  accessKeyId: string | null;
  secretAccessKeyFile: string | null;
  maxRetries: number;
  /** a response may stall this long (between chunks, not in total); 0 waits forever */
  readTimeoutSecs: number;
  /** no retry starts this long after the first attempt */
  retryTimeoutSecs: number;
}

// The SDK re-reads a credential provider when its expiration is less than 5 minutes away, so a
// rotated secret file is picked up within 10 minutes without a restart.
const SECRET_REREAD_MS = 15 * 60_000;

export function createS3Client(options: S3ConnectionOptions): { client: S3Client; retries: S3RetryPolicy } {
  const retries = new S3RetryPolicy({
    maxAttempts: options.maxRetries + 1,
    retryWindowMs: options.retryTimeoutSecs * 1000,
  });
  const stallMs = options.readTimeoutSecs * 1000;
  const config: S3ClientConfig = {
    region: options.region,
    forcePathStyle: options.endpoint !== null && !options.virtualHostedStyle,
    maxAttempts: options.maxRetries + 1,
    retryStrategy: retries,
    // socketTimeout is an idle timer that every received chunk resets, as s3.readTimeoutSecs asks;
    // requestTimeout would cap a whole multi-gigabyte download instead.
    requestHandler: { connectionTimeout: stallMs, socketTimeout: stallMs },
    // Checksums only where S3 requires them: compatible servers (s3rver, older MinIO, Garage)
    // reject the aws-chunked CRC trailers the SDK otherwise sends, and blobs are content-addressed anyway.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  };
  if (options.endpoint !== null) config.endpoint = options.endpoint;
  const credentials = fileCredentials(options);
  if (credentials !== undefined) config.credentials = credentials;
  return { client: new S3Client(config), retries };
}

function fileCredentials(options: S3ConnectionOptions): S3ClientConfig['credentials'] {
  const { accessKeyId, secretAccessKeyFile } = options;
  if (accessKeyId === null && secretAccessKeyFile === null) return undefined;
  if (accessKeyId === null || secretAccessKeyFile === null) {
    throw new Error(
      's3.accessKeyId and s3.secretAccessKeyFile go together: set both, or neither to use instance credentials or the environment',
    );
  }
  readSecretFile(secretAccessKeyFile); // an unreadable file fails now, at start, not at the first upload
  return async () => ({
    accessKeyId,
    secretAccessKey: readSecretFile(secretAccessKeyFile),
    expiration: new Date(Date.now() + SECRET_REREAD_MS),
  });
}
