// PostgreSQL arrays in their text form, read straight from the bytes a raw query returns
// (postgres.js `.raw()`), for a closure's whole-graph query (buildTimeClosures.ts): at 50,000
// derivations that is ~47,000 ids and sizes and ~185,000 edges, whose parsing into JavaScript
// arrays of strings and numbers took about as long as ranking the closure.

const OPEN = 0x7b; // {
const CLOSE = 0x7d; // }
const COMMA = 0x2c;
const ZERO = 0x30;

/** The whole numbers of `{1,22,333}` (non-negative, below 2^53), or of `{}`. */
export function wholeNumbers(text: Buffer): Float64Array {
  if (text[0] !== OPEN || text[text.length - 1] !== CLOSE) throw new Error('not an array of whole numbers');
  if (text.length === 2) return new Float64Array(0);
  let count = 1;
  for (let i = 1; i < text.length - 1; i++) if (text[i] === COMMA) count++;
  const out = new Float64Array(count);
  let k = 0;
  let value = 0;
  let digits = 0;
  for (let i = 1; i < text.length; i++) {
    const c = text[i]!;
    if (c === COMMA || c === CLOSE) {
      // an empty element, or one past 2^53 (its value then rounded), is refused rather than misread
      if (digits === 0 || value > Number.MAX_SAFE_INTEGER) throw new Error('not an array of whole numbers below 2^53');
      out[k++] = value;
      value = 0;
      digits = 0;
    } else {
      const digit = c - ZERO;
      if (digit < 0 || digit > 9) throw new Error('not an array of whole numbers');
      value = value * 10 + digit;
      digits++;
    }
  }
  return out;
}

/** The uuids of `{uuid,uuid,...}` (each 36 characters, unquoted): their count and the i-th as text. */
export function uuidList(text: Buffer): { length: number; at: (i: number) => string } {
  const length = text.length === 2 ? 0 : (text.length - 1) / 37;
  if (text[0] !== OPEN || text[text.length - 1] !== CLOSE || !Number.isInteger(length)) throw new Error('not an array of uuids');
  return { length, at: (i) => text.toString('latin1', 1 + 37 * i, 37 + 37 * i) };
}
