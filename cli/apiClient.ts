// The kiln client's HTTP: JSON calls under /api/v1 with the Bearer token, unwrapping the envelope
// ({error, message, code}) into a value or an ApiRequestError that keeps the status, the code and
// the headers (a resumable upload reads Upload-Offset from its 409), and the binary cache's
// narinfo probe (HTTP Basic with the token as password, as Nix would send it).
//
// Requests go by node:http(s), not fetch: fetch copies a byte body into a fresh ArrayBuffer, which
// for 32 MiB NAR chunks costs a page-faulting copy per chunk. Here a body is written from the
// caller's memory as it is, with its Content-Length, over the modules' global agents (keep-alive
// since Node 19, and they let a connection go before the server's announced Keep-Alive timeout).
import { createReadStream } from 'node:fs';
import http, { type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import https from 'node:https';
import type { ClientSettings } from './clientConfig.js';

export class ApiRequestError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Headers,
  ) {
    super(message);
    this.name = 'ApiRequestError';
  }
}

export const isApiRequestError = (e: unknown): e is ApiRequestError => e instanceof ApiRequestError;

export type QueryValue = string | number | undefined;

export interface CallOptions {
  /** JSON body */
  body?: unknown;
  /**
   * raw bytes, sent as application/octet-stream without being copied; the call reads them until
   * it settles (not after), so the caller may refill the memory once it has.
   */
  bytes?: Uint8Array;
  /** a file sent as application/octet-stream, read as the request goes out (never whole in memory) */
  file?: { path: string; size: number };
  query?: Record<string, QueryValue>;
}

/** What a request sends: bytes in memory, or a file streamed from disk. */
type RequestBody = Buffer | { path: string; size: number };

interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

/** fetch followed redirects; with the token on board this client names the address instead. */
const redirectError = (what: string, res: Answer): ApiRequestError | null => {
  const location = res.headers.get('location');
  if (res.status < 300 || res.status >= 400 || location === null) return null;
  return new ApiRequestError(res.status, 'redirect', `${what}: the server answered ${res.status}, redirecting to ${location}; point kiln at the server's final address (kiln login, or KILN_SERVER)`, res.headers);
};

const headersOf = (raw: IncomingHttpHeaders): Headers => {
  const headers = new Headers();
  for (const [name, value] of Object.entries(raw)) {
    if (Array.isArray(value)) for (const v of value) headers.append(name, v);
    else if (value !== undefined) headers.set(name, value);
  }
  return headers;
};

const resetCodes = new Set(['ECONNRESET', 'EPIPE']);

/** undici's headers and body timeouts, which fetch applied */
const IDLE_TIMEOUT_MS = 300_000;

/**
 * One request. It settles only when node:http is done with the request (its 'close': the body was
 * written out, or the connection torn down) and with the answer, so `body`'s memory is free again
 * by then. An answer that comes before the whole body was written (a 4xx about the request line)
 * ends the request: kiln's server reads no more of that body, and waiting would stall until its
 * idle timeout. A GET or HEAD whose pooled connection turns out closed is sent again once on a new
 * one, as Node's documentation advises; other methods fail (the server may have acted on them:
 * uploadNar asks it how far the upload got).
 */
function exchange(url: URL, method: string, headers: Record<string, string>, body: RequestBody | undefined, again = true): Promise<Answer> {
  const transport = url.protocol === 'https:' ? https : url.protocol === 'http:' ? http : null;
  if (transport === null) return Promise.reject(new Error(`unsupported protocol ${url.protocol}`));
  const sent: Record<string, string | number> = { ...headers };
  if (body !== undefined) sent['content-length'] = Buffer.isBuffer(body) ? body.byteLength : body.size;
  return new Promise((resolve, reject) => {
    let res: IncomingMessage | undefined;
    let text = '';
    let failure: (Error & { code?: string }) | undefined;
    let requestClosed = false;
    let answerClosed = false;
    const settle = () => {
      if (!requestClosed || (res !== undefined && !answerClosed)) return;
      if (res?.complete) resolve({ status: res.statusCode ?? 0, headers: headersOf(res.headers), text });
      else if (again && (method === 'GET' || method === 'HEAD') && res === undefined && req.reusedSocket && resetCodes.has(failure?.code ?? '')) resolve(exchange(url, method, headers, body, false));
      else reject(failure ?? new Error('the connection closed before the answer was complete'));
    };
    const req = transport.request(url, { method, headers: sent }, (answer) => {
      res = answer;
      answer.setEncoding('utf8');
      answer.on('data', (piece: string) => {
        text += piece;
      });
      answer.on('end', () => {
        if (!req.writableFinished) req.destroy();
      });
      answer.on('error', (e) => {
        failure ??= e;
      });
      answer.on('close', () => {
        answerClosed = true;
        settle();
      });
    });
    // A connection that goes quiet (a half-open socket) fails the request, as fetch's timeouts
    // did, so an upload's retry logic takes over instead of waiting forever.
    req.setTimeout(IDLE_TIMEOUT_MS, () => req.destroy(new Error(`the connection was idle for ${IDLE_TIMEOUT_MS / 1000} s`)));
    req.on('error', (e) => {
      failure ??= e;
    });
    req.on('close', () => {
      requestClosed = true;
      settle();
    });
    if (body === undefined || Buffer.isBuffer(body)) req.end(body);
    else {
      const file = createReadStream(body.path);
      // a file that cannot be read ends the request with that reason
      file.on('error', (e) => req.destroy(e));
      // a request ended early (a 413 before the whole file went) closes the file too
      req.on('close', () => file.destroy());
      file.pipe(req);
    }
  });
}

/** A failure answer's envelope (`{error, message, code}`) as an ApiRequestError. */
function envelopeError(what: string, status: number, envelope: { message?: unknown; code?: unknown }, headers: Headers): ApiRequestError {
  const message = typeof envelope.message === 'string' ? envelope.message : `${what} failed with status ${status}`;
  return new ApiRequestError(status, typeof envelope.code === 'string' ? envelope.code : 'error', message, headers);
}

export class ApiClient {
  constructor(readonly settings: ClientSettings) {}

  private async send(url: string, method: string, headers: Record<string, string>, body?: RequestBody): Promise<Answer> {
    try {
      return await exchange(new URL(url), method, headers, body);
    } catch (e) {
      throw new Error(`cannot reach the kiln server at ${this.settings.server}: ${(e as Error).message}`, { cause: e });
    }
  }

  /** `method path` under /api/v1; the envelope's message on success. */
  async call<T>(method: string, path: string, opts: CallOptions = {}): Promise<T> {
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined) query.set(k, String(v));
    const url = `${this.settings.server}/api/v1${path}${query.size > 0 ? `?${query}` : ''}`;
    // Without a token (kiln login before signing in) the call is anonymous.
    const headers: Record<string, string> = this.settings.token === '' ? {} : { authorization: `Bearer ${this.settings.token}` };
    let body: RequestBody | undefined;
    if (opts.file !== undefined) {
      headers['content-type'] = 'application/octet-stream';
      body = opts.file;
    } else if (opts.bytes !== undefined) {
      headers['content-type'] = 'application/octet-stream';
      // A view of the same memory, not a copy.
      body = Buffer.from(opts.bytes.buffer, opts.bytes.byteOffset, opts.bytes.byteLength);
    } else if (opts.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = Buffer.from(JSON.stringify(opts.body));
    }
    const res = await this.send(url, method, headers, body);
    const redirect = redirectError(`${method} ${path}`, res);
    if (redirect !== null) throw redirect;
    let envelope: { error?: unknown; message?: unknown; code?: unknown };
    try {
      envelope = JSON.parse(res.text) as typeof envelope;
    } catch {
      throw new ApiRequestError(res.status, 'not_json', `${method} ${path}: the server answered ${res.status} with something other than JSON: ${res.text.slice(0, 200)}`, res.headers);
    }
    if (res.status >= 200 && res.status < 300 && envelope.error !== true) return envelope.message as T;
    throw envelopeError(`${method} ${path}`, res.status, envelope, res.headers);
  }

  /**
   * `method path` under /api/v1 for a route that answers plain text (a build log): its body handed
   * to `onText` piece by piece as it arrives, until the server ends it. A failure answers the
   * envelope, which becomes an ApiRequestError before anything is handed over.
   */
  async stream(method: string, path: string, onText: (text: string) => void): Promise<void> {
    const what = `${method} ${path}`;
    const url = new URL(`${this.settings.server}/api/v1${path}`);
    const transport = url.protocol === 'https:' ? https : http;
    await new Promise<void>((resolve, reject) => {
      const fail = (e: Error) => reject(new Error(`cannot reach the kiln server at ${this.settings.server}: ${e.message}`, { cause: e }));
      const req = transport.request(url, { method, headers: { authorization: `Bearer ${this.settings.token}` } }, (res) => {
        res.setEncoding('utf8');
        const status = res.statusCode ?? 0;
        if (status < 200 || status >= 300) {
          let text = '';
          res.on('data', (piece: string) => (text += piece));
          res.on('end', () => {
            const headers = headersOf(res.headers);
            const redirect = redirectError(what, { status, headers, text });
            if (redirect !== null) return reject(redirect);
            let envelope: { error?: unknown; message?: unknown; code?: unknown } = {};
            try {
              envelope = JSON.parse(text) as typeof envelope;
            } catch {
              // not an envelope: the status alone
            }
            reject(envelopeError(what, status, envelope, headers));
          });
          return;
        }
        res.on('data', onText);
        res.on('error', fail);
        res.on('close', () => (res.complete ? resolve() : fail(new Error('the connection closed before the server ended the stream'))));
      });
      req.on('error', fail);
      req.end();
    });
  }

  /** `GET path` under /api/v1 for a route that answers plain text, whole. */
  async text(path: string): Promise<string> {
    let text = '';
    await this.stream('GET', path, (piece) => (text += piece));
    return text;
  }

  /** Whether the cache answers a narinfo for the path (it holds it, or an upstream of it does). */
  async narinfoExists(cache: string, hashPart: string): Promise<boolean> {
    const basic = Buffer.from(`kiln:${this.settings.token}`).toString('base64');
    const res = await this.send(`${this.settings.server}/cache/${encodeURIComponent(cache)}/${hashPart}.narinfo`, 'HEAD', { authorization: `Basic ${basic}` });
    if (res.status === 200) return true;
    if (res.status === 404) return false;
    throw redirectError(`HEAD ${hashPart}.narinfo in cache "${cache}"`, res) ?? new ApiRequestError(res.status, 'error', `HEAD ${hashPart}.narinfo in cache "${cache}" answered ${res.status}`, res.headers);
  }
}
