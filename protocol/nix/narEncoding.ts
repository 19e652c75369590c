// The NAR framing shared by the parser and the writers: every token is a string, written as a
// little-endian u64 length, the bytes, and zero padding to a multiple of 8
// (libutil/archive.cc, libutil/serialise.cc).
export const NAR_MAGIC = 'nix-archive-1';

const encoder = new TextEncoder();

export const padding = (length: number): number => (8 - (length % 8)) % 8;

/** The 8-byte little-endian length prefix. Lengths above 2^53 cannot occur in a JS NAR. */
export function encodeU64(value: number): Uint8Array {
  const out = new Uint8Array(8);
  const view = new DataView(out.buffer);
  view.setUint32(0, value >>> 0, true);
  view.setUint32(4, Math.floor(value / 0x1_0000_0000), true);
  return out;
}

/** One framed string token: length, bytes, padding. */
export function encodeNarString(value: string | Uint8Array): Uint8Array {
  const bytes = typeof value === 'string' ? encoder.encode(value) : value;
  const out = new Uint8Array(8 + bytes.length + padding(bytes.length));
  out.set(encodeU64(bytes.length), 0);
  out.set(bytes, 8);
  return out;
}

/** Several framed tokens in one buffer; used for the fixed runs such as `( type regular`. */
export function encodeNarStrings(...values: (string | Uint8Array)[]): Uint8Array {
  const parts = values.map(encodeNarString);
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
