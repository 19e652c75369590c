// fetch() through the guarded client, for upstream caches (GET, HEAD) and a Git host's REST API
// (JSON bodies). Global fetch dials by
// itself and cannot be told which addresses are allowed; this one connects only where the
// client's policy lets it, on every redirect hop too. Redirects are followed (an upstream kiln on
// S3 answers NAR requests with a presigned URL) at most MAX_REDIRECTS times, to http(s) only, and
// Authorization and Cookie are dropped when the origin changes, as fetch does.
import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import type { OutboundClient } from './outboundClient.js';

export type OutboundFetch = (input: string | URL, init?: OutboundFetchInit) => Promise<Response>;

export interface OutboundFetchInit {
  method?: string;
  headers?: Headers | Record<string, string>;
  /** a request body, sent with its Content-Length; a redirect is then not followed (refused unless redirect is 'manual') */
  body?: string | Uint8Array | null;
  signal?: AbortSignal | null;
  redirect?: 'follow' | 'error' | 'manual';
}

const MAX_REDIRECTS = 20;
const REDIRECTS = new Set([301, 302, 303, 307, 308]);
// Statuses whose Response may not have a body (the Fetch standard's null body statuses).
const NULL_BODY = new Set([101, 103, 204, 205, 304]);

export function outboundFetch(client: OutboundClient): OutboundFetch {
  return async (input, init = {}) => {
    const method = (init.method ?? 'GET').toUpperCase();
    const headers = new Headers(init.headers);
    const body = init.body ?? null;
    if (body !== null) headers.set('content-length', String(Buffer.byteLength(body)));
    let url = new URL(input);
    for (let hop = 0; ; hop++) {
      const answer = await exchange(client, url, method, headers, body, init.signal ?? null);
      const location = answer.headers['location'];
      if (init.redirect === 'manual' || !REDIRECTS.has(answer.statusCode ?? 0) || location === undefined) return toResponse(answer, method, url);
      answer.destroy();
      if (init.redirect === 'error' || body !== null) throw new Error(`${url.href} redirects, and redirects were refused`);
      if (hop >= MAX_REDIRECTS) throw new Error(`${input.toString()} redirects more than ${MAX_REDIRECTS} times`);
      const next = new URL(location, url);
      if (next.protocol !== 'http:' && next.protocol !== 'https:') throw new Error(`${url.href} redirects to ${next.protocol}//, not http(s)`);
      if (next.origin !== url.origin) {
        headers.delete('authorization');
        headers.delete('cookie');
      }
      url = next;
    }
  };
}

/** One request; resolves with the response head, its body unread. */
function exchange(client: OutboundClient, url: URL, method: string, headers: Headers, body: string | Uint8Array | null, signal: AbortSignal | null): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    signal?.throwIfAborted();
    const req = client.request(url, { method, headers: Object.fromEntries(headers) });
    const onAbort = () => req.destroy(signal?.reason instanceof Error ? signal.reason : new Error('aborted'));
    signal?.addEventListener('abort', onAbort, { once: true });
    req.once('error', (err) => {
      signal?.removeEventListener('abort', onAbort);
      reject(err);
    });
    req.once('response', (res) => {
      // The body belongs to the caller now; aborting the signal still ends it, as with fetch.
      res.once('close', () => signal?.removeEventListener('abort', onAbort));
      resolve(res);
    });
    req.end(body ?? undefined);
  });
}

function toResponse(res: IncomingMessage, method: string, url: URL): Response {
  const status = res.statusCode ?? 0;
  if (status < 200 || status > 599) {
    res.destroy();
    throw new Error(`${url.href} answered status ${status}`);
  }
  const headers = new Headers();
  for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) {
    try {
      headers.append(res.rawHeaders[i]!, res.rawHeaders[i + 1]!);
    } catch {
      // a header value fetch would not accept either: left out
    }
  }
  if (method === 'HEAD' || NULL_BODY.has(status)) {
    res.resume();
    return new Response(null, { status, headers });
  }
  return new Response(Readable.toWeb(res) as ReadableStream<Uint8Array>, { status, headers });
}
