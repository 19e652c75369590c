// The kiln client's HTTP: JSON calls under /api/v1 with the Bearer token, unwrapping the envelope
// ({error, message, code}) into a value or an ApiRequestError that keeps the status, the code and
// the headers (a resumable upload reads Upload-Offset from its 409), and the binary cache's
// narinfo probe (HTTP Basic with the token as password, as Nix would send it).
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
  /** raw bytes, sent as application/octet-stream */
  bytes?: Uint8Array;
  query?: Record<string, QueryValue>;
}

export class ApiClient {
  constructor(
    readonly settings: ClientSettings,
    private readonly fetchFn: typeof fetch = fetch,
  ) {}

  private async send(url: string, init: RequestInit): Promise<Response> {
    try {
      return await this.fetchFn(url, init);
    } catch (e) {
      const cause = (e as { cause?: { message?: string } }).cause?.message ?? (e as Error).message;
      throw new Error(`cannot reach the kiln server at ${this.settings.server}: ${cause}`, { cause: e });
    }
  }

  /** `method path` under /api/v1; the envelope's message on success. */
  async call<T>(method: string, path: string, opts: CallOptions = {}): Promise<T> {
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined) query.set(k, String(v));
    const url = `${this.settings.server}/api/v1${path}${query.size > 0 ? `?${query}` : ''}`;
    const headers: Record<string, string> = { authorization: `Bearer ${this.settings.token}` };
    let body: Uint8Array | string | undefined;
    if (opts.bytes !== undefined) {
      headers['content-type'] = 'application/octet-stream';
      body = opts.bytes;
    } else if (opts.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(opts.body);
    }
    const res = await this.send(url, { method, headers, ...(body === undefined ? {} : { body }) });
    const text = await res.text();
    let envelope: { error?: unknown; message?: unknown; code?: unknown };
    try {
      envelope = JSON.parse(text) as typeof envelope;
    } catch {
      throw new ApiRequestError(res.status, 'not_json', `${method} ${path}: the server answered ${res.status} with something other than JSON: ${text.slice(0, 200)}`, res.headers);
    }
    if (res.ok && envelope.error !== true) return envelope.message as T;
    const message = typeof envelope.message === 'string' ? envelope.message : `${method} ${path} failed with status ${res.status}`;
    throw new ApiRequestError(res.status, typeof envelope.code === 'string' ? envelope.code : 'error', message, res.headers);
  }

  /** Whether the cache answers a narinfo for the path (it holds it, or an upstream of it does). */
  async narinfoExists(cache: string, hashPart: string): Promise<boolean> {
    const basic = Buffer.from(`kiln:${this.settings.token}`).toString('base64');
    const res = await this.send(`${this.settings.server}/cache/${encodeURIComponent(cache)}/${hashPart}.narinfo`, {
      method: 'HEAD',
      headers: { authorization: `Basic ${basic}` },
    });
    if (res.status === 200) return true;
    if (res.status === 404) return false;
    throw new ApiRequestError(res.status, 'error', `HEAD ${hashPart}.narinfo in cache "${cache}" answered ${res.status}`, res.headers);
  }
}
