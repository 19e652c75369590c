// A put() given a size must not store a blob of another length. Both backends commit only after the
// source ends normally, so failing the iteration itself (before it reports "done") stores nothing.

/** Thrown from within a put() whose source delivered a different number of bytes than promised. */
export class BlobSizeError extends Error {
  constructor(key: string, expected: number, actual: number, complete: boolean) {
    super(
      complete
        ? `blob ${key}: expected ${expected} bytes, the source delivered ${actual}`
        : `blob ${key}: expected ${expected} bytes, the source delivered more`,
    );
    this.name = 'BlobSizeError';
  }
}

export function assertSize(size: number | undefined): void {
  if (size !== undefined && (!Number.isSafeInteger(size) || size < 0)) {
    throw new Error(`invalid blob size ${String(size)}: must be a non-negative integer`);
  }
}

/** Passes `source` through, failing as soon as it is known to differ from `size` bytes. */
export async function* withExpectedSize(
  key: string,
  source: AsyncIterable<Uint8Array>,
  size: number | undefined,
): AsyncGenerator<Uint8Array> {
  if (size === undefined) {
    yield* source;
    return;
  }
  let seen = 0;
  for await (const chunk of source) {
    seen += chunk.byteLength;
    if (seen > size) throw new BlobSizeError(key, size, seen, false);
    yield chunk;
  }
  if (seen !== size) throw new BlobSizeError(key, size, seen, true);
}
