// The Range header of a NAR request (RFC 9110 §14): one range is honoured; several ranges, or a
// header kiln does not understand, are ignored and the whole file is sent, as the RFC allows.

export type RangeRequest =
  | { kind: 'whole' }
  | { kind: 'part'; start: number; end: number }
  /** 416 with `Content-Range: bytes *\/size` */
  | { kind: 'unsatisfiable' };

export function parseRange(header: string | undefined, size: number): RangeRequest {
  if (header === undefined) return { kind: 'whole' };
  const match = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(header);
  if (!match || (match[1] === '' && match[2] === '')) return { kind: 'whole' };
  if (match[1] === '') {
    // bytes=-N: the last N bytes
    const suffix = Number(match[2]);
    if (suffix === 0 || size === 0) return { kind: 'unsatisfiable' };
    return { kind: 'part', start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(match[1]);
  if (match[2] !== '' && Number(match[2]) < start) return { kind: 'whole' }; // not a valid range: ignored
  const end = match[2] === '' ? size - 1 : Math.min(Number(match[2]), size - 1);
  if (!Number.isSafeInteger(start) || start >= size) return { kind: 'unsatisfiable' };
  return { kind: 'part', start, end };
}
