// Nix's base-32 ("nix32"): a 32-letter alphabet without e, o, u, t (so no words appear in
// hashes), printed most significant digit first, where digit n holds bits 5n..5n+4 of the
// little-endian byte string. This is not RFC 4648 base32; the bit order is Nix's own
// (libutil/hash.cc printHash32).
export const NIX32_ALPHABET = '0123456789abcdfghijklmnpqrsvwxyz';

const DIGIT_OF = new Int8Array(128).fill(-1);
for (let i = 0; i < NIX32_ALPHABET.length; i++) DIGIT_OF[NIX32_ALPHABET.charCodeAt(i)] = i;

/** Length in characters of the nix32 form of `byteLength` bytes. */
export const nix32Length = (byteLength: number): number => Math.ceil((byteLength * 8) / 5);

export function encodeNix32(bytes: Uint8Array): string {
  const len = nix32Length(bytes.length);
  let out = '';
  for (let n = len - 1; n >= 0; n--) {
    const b = n * 5;
    const i = b >> 3;
    const j = b & 7;
    const low = (bytes[i] ?? 0) >> j;
    const high = i + 1 < bytes.length ? (bytes[i + 1] ?? 0) << (8 - j) : 0;
    out += NIX32_ALPHABET[(low | high) & 0x1f];
  }
  return out;
}

/**
 * Decodes nix32 text into `byteLength` bytes, or returns undefined when the text has the wrong
 * length, a letter outside the alphabet, or bits set beyond the last byte (Nix rejects those too,
 * so every byte string has exactly one nix32 spelling).
 */
export function decodeNix32(text: string, byteLength: number): Uint8Array | undefined {
  if (text.length !== nix32Length(byteLength)) return undefined;
  const out = new Uint8Array(byteLength);
  for (let n = 0; n < text.length; n++) {
    const code = text.charCodeAt(text.length - n - 1);
    const digit = code < 128 ? (DIGIT_OF[code] ?? -1) : -1;
    if (digit < 0) return undefined;
    const b = n * 5;
    const i = b >> 3;
    const j = b & 7;
    out[i] = (out[i] ?? 0) | ((digit << j) & 0xff);
    const carry = digit >> (8 - j);
    if (i + 1 < byteLength) out[i + 1] = (out[i + 1] ?? 0) | carry;
    else if (carry !== 0) return undefined;
  }
  return out;
}

export const isNix32 = (text: string): boolean => {
  for (let k = 0; k < text.length; k++) {
    const code = text.charCodeAt(k);
    if (code >= 128 || (DIGIT_OF[code] ?? -1) < 0) return false;
  }
  return true;
};
