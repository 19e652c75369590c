// Reading the SDK's errors: S3 answers a missing object with 404 (NoSuchKey, or a bodiless NotFound
// for HEAD), and a missing bucket with 404 too, which must not pass for "no such blob".

export function s3ErrorStatus(error: unknown): number | undefined {
  if (typeof error !== 'object' || error === null || !('$metadata' in error)) return undefined;
  const metadata = error.$metadata;
  if (typeof metadata !== 'object' || metadata === null || !('httpStatusCode' in metadata)) return undefined;
  return typeof metadata.httpStatusCode === 'number' ? metadata.httpStatusCode : undefined;
}

export function s3ObjectMissing(error: unknown): boolean {
  return s3ErrorStatus(error) === 404 && !(error instanceof Error && error.name === 'NoSuchBucket');
}
