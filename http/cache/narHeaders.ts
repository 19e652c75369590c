// The status and headers of a stored NAR file's answer, whole or one range of it: the main thread's
// route (narFile.ts) and a serving thread sending the file itself (http/serving/threadNars.ts)
// answer alike.
import type { Headers } from '../reply.js';
import type { RangeRequest } from './byteRange.js';

// Content-addressed: the bytes under a name never change.
const PUBLIC_NAR = { 'Content-Type': 'application/x-nix-nar', 'Accept-Ranges': 'bytes', 'Cache-Control': 'public, max-age=31536000, immutable' };
const PRIVATE_NAR = { ...PUBLIC_NAR, 'Cache-Control': 'private, max-age=31536000, immutable' };

export interface NarAnswerHead {
  status: 200 | 206;
  /** the bytes the answer carries */
  start: number;
  length: number;
  headers: Headers;
}

/** The answer to a satisfiable range (or none) of a file of `size` bytes in a public or private cache. */
export function narAnswerHead(isPublic: boolean, range: Exclude<RangeRequest, { kind: 'unsatisfiable' }>, size: number): NarAnswerHead {
  const headers = isPublic ? PUBLIC_NAR : PRIVATE_NAR;
  if (range.kind === 'whole') return { status: 200, start: 0, length: size, headers };
  return { status: 206, start: range.start, length: range.end - range.start + 1, headers: { ...headers, 'Content-Range': `bytes ${range.start}-${range.end}/${size}` } };
}
