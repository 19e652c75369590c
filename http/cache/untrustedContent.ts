// Tenant bytes on kiln's own origin (serve/ files out of a NAR, logs and debug info from a tenant's
// upstream): the origin also hosts the web UI and its session, so nothing served here may run as
// kiln. Every such answer is sandboxed (an opaque origin with no script, no plugin, no fetch), the
// browser may not guess another type, and anything a browser would render actively is a download.
import { isApiError } from '../../protocol/index.js';
import { isReply, type Headers, type Reply } from '../reply.js';
import type { Handler } from '../router.js';

export const SANDBOX_HEADERS: Readonly<Headers> = {
  'Content-Security-Policy': "sandbox; default-src 'none'",
  'X-Content-Type-Options': 'nosniff',
};

// Types a browser shows inertly. Everything else (HTML, SVG, XML, JavaScript, PDF, wasm, types kiln
// does not know, whatever an upstream claims) is served as an attachment.
const INLINE_TYPES = new Set([
  'text/plain', 'text/css', 'text/markdown', 'application/json',
  'image/png', 'image/jpeg', 'image/gif', 'image/webp', 'image/vnd.microsoft.icon',
  'font/woff', 'font/woff2',
]);

const mediaType = (contentType: string): string => contentType.split(';')[0]!.trim().toLowerCase();

export const isInlineSafe = (contentType: string): boolean => INLINE_TYPES.has(mediaType(contentType));

/** A file name for Content-Disposition: the last path segment, quoted-string safe. */
const dispositionName = (name: string): string => name.replace(/[^A-Za-z0-9._+-]/g, '_') || 'download';

/** The headers of a tenant's file: its type, the sandbox, and `attachment` unless the type is inert. */
export function untrustedFileHeaders(contentType: string, fileName: string): Headers {
  return {
    'Content-Type': contentType,
    ...SANDBOX_HEADERS,
    ...(isInlineSafe(contentType) ? {} : { 'Content-Disposition': `attachment; filename="${dispositionName(fileName)}"` }),
  };
}

/** Adds the sandbox headers to every reply of `handler`, errors and redirects included. */
export function sandboxed<P>(handler: Handler<P>): Handler<P> {
  return async (req) => {
    let result: unknown;
    try {
      result = await handler(req);
    } catch (e) {
      throw isApiError(e) ? e.withHeaders(SANDBOX_HEADERS) : e;
    }
    if (!isReply(result)) return result;
    // A copy: some replies share a constant headers object.
    return { ...result, headers: { ...result.headers, ...SANDBOX_HEADERS } } satisfies Reply;
  };
}
