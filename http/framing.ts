// Where a request's body ends (RFC 9112 §6). uWS takes the first of two Content-Length headers
// and decodes any Transfer-Encoding that ends in "chunked"; a proxy in front of kiln may read the
// same bytes another way, and the bytes one of them takes for a body the other takes for the next
// request (request smuggling). So a request whose framing has more than one reading is refused.

export type Framing = { ok: true; length: number | null } | { ok: false; problem: string };

const NO_BODY: Framing = { ok: true, length: null };

/**
 * The body length the request declares (null when it declares none, or is chunked), from headers
 * whose repeats are joined with ", " (server.ts readHeaders).
 */
export function requestFraming(contentLength: string | undefined, transferEncoding: string | undefined): Framing {
  if (transferEncoding !== undefined) {
    // Transfer codings are case-insensitive; chunked once and nothing else is the only one kiln reads.
    if (transferEncoding.trim().toLowerCase() !== 'chunked') {
      return { ok: false, problem: `Transfer-Encoding ${JSON.stringify(transferEncoding.slice(0, 100))} is not supported: only "chunked" is` };
    }
    if (contentLength !== undefined) return { ok: false, problem: 'a request may not have both Content-Length and Transfer-Encoding' };
    return NO_BODY;
  }
  if (contentLength === undefined) return NO_BODY;
  const values = contentLength.split(',').map((v) => v.trim());
  if (!values.every((v) => /^\d{1,15}$/.test(v))) {
    return { ok: false, problem: `Content-Length ${JSON.stringify(contentLength.slice(0, 100))} is not a byte count` };
  }
  // Repeats of one value say the same thing (RFC 9110 §8.6); different values cannot both be right.
  if (values.some((v) => Number(v) !== Number(values[0]))) {
    return { ok: false, problem: `the request has different Content-Length headers (${values.join(', ').slice(0, 100)})` };
  }
  return { ok: true, length: Number(values[0]) };
}
