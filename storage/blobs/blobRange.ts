// Byte ranges follow HTTP's rules (RFC 9110 §14.1.2), which S3 also follows, so both backends and
// the cache routes agree: an end past the blob is cut to its last byte; a start past it is unsatisfiable.

/** Inclusive byte offsets, as in an HTTP `Range: bytes=start-end` header. */
export interface BlobRange {
  start: number;
  end: number;
}

/** A range that no byte of the blob satisfies; the cache routes answer 416 with `bytes * /size`. */
export class BlobRangeError extends Error {
  readonly size: number;

  constructor(key: string, range: BlobRange, size: number) {
    super(`range bytes=${range.start}-${range.end} of blob ${key} is unsatisfiable: the blob has ${size} bytes`);
    this.name = 'BlobRangeError';
    this.size = size;
  }
}

/** Throws a plain Error for a malformed range (a caller's bug, not a client's request). */
export function assertRangeShape(range: BlobRange): void {
  const { start, end } = range;
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || start < 0 || end < start) {
    throw new Error(`invalid blob range ${JSON.stringify(range)}: start and end must be integers with 0 <= start <= end`);
  }
}

/** The part of `range` inside a blob of `size` bytes; BlobRangeError when there is none. */
export function clampRange(key: string, range: BlobRange, size: number): BlobRange {
  if (range.start >= size) throw new BlobRangeError(key, range, size);
  return { start: range.start, end: Math.min(range.end, size - 1) };
}
