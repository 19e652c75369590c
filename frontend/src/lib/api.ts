// The one way pages talk to kiln: /api/v1 with the session as a Bearer token, the envelope
// `{error, message, code}` unwrapped, and failures as ApiFailure (which names the field it is about).
import { forgetSession, sessionToken } from './session';

export const API = '/api/v1';

/** A refusal from the API (or the network), with the field it names when the message starts with one. */
export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** the request body field the message is about (`invalid_body` answers start with "field: ") */
    readonly field: string | null,
  ) {
    super(message);
    this.name = 'ApiFailure';
  }
}

type Envelope = { error: false; message: unknown } | { error: true; message: string; code?: string };

const isEnvelope = (v: unknown): v is Envelope =>
  typeof v === 'object' && v !== null && 'error' in v && typeof v.error === 'boolean' && 'message' in v;

/** "username: must be …" names the field username; a dotted path names its first segment. */
export function fieldOf(message: string): string | null {
  const m = /^([a-z_][a-z0-9_]*)(?:\.[\w.[\]]+)?: /i.exec(message);
  return m ? m[1]! : null;
}

/** Listeners told when the server rejects the session (401), so the layout can send the user to sign in. */
const signedOutListeners = new Set<() => void>();
export function onSignedOut(listener: () => void): () => void {
  signedOutListeners.add(listener);
  return () => signedOutListeners.delete(listener);
}

export type Method = 'GET' | 'PUT' | 'POST' | 'PATCH' | 'DELETE';

/** Reads a route's index.html started before the app booted (frontend/scripts/earlyReads.client.js), by path. */
type EarlyReads = Record<string, { token: string; response: Promise<Response> } | undefined>;

/** The early read of `path` made with `token`, once: the next GET of it fetches again. */
function takeEarlyRead(path: string, token: string | null): Promise<Response> | undefined {
  const reads = (globalThis as { kilnEarlyReads?: EarlyReads }).kilnEarlyReads;
  const read = reads?.[path];
  if (!reads || !read) return undefined;
  delete reads[path];
  return read.token === token ? read.response : undefined;
}

/**
 * Calls `path` (under /api/v1) and returns the envelope's message typed as T. The caller names T
 * from protocol/api where a schema exists (`z.infer` types, imported with `import type`).
 */
export async function api<T>(method: Method, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { Accept: 'application/json' };
  const token = sessionToken();
  if (token) headers['Authorization'] = `Bearer ${token}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response: Response;
  try {
    response = await ((method === 'GET' ? takeEarlyRead(path, token) : undefined)
      ?? fetch(API + path, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) }));
  } catch (e) {
    throw new ApiFailure(0, 'network', `kiln could not be reached (${e instanceof Error ? e.message : String(e)})`, null);
  }
  let parsed: unknown;
  try {
    parsed = await response.json();
  } catch {
    throw new ApiFailure(response.status, 'invalid_response', `kiln answered ${response.status} without a JSON envelope`, null);
  }
  if (!isEnvelope(parsed)) throw new ApiFailure(response.status, 'invalid_response', `kiln answered ${response.status} with an unexpected body`, null);
  if (parsed.error) {
    if (response.status === 401 && token) {
      forgetSession();
      for (const listener of signedOutListeners) listener();
    }
    throw new ApiFailure(response.status, parsed.code ?? 'error', parsed.message, fieldOf(parsed.message));
  }
  return parsed.message as T;
}

export const get = <T>(path: string): Promise<T> => api<T>('GET', path);
export const post = <T>(path: string, body?: unknown): Promise<T> => api<T>('POST', path, body);
export const put = <T>(path: string, body?: unknown): Promise<T> => api<T>('PUT', path, body);
export const patch = <T>(path: string, body?: unknown): Promise<T> => api<T>('PATCH', path, body);
export const del = <T>(path: string, body?: unknown): Promise<T> => api<T>('DELETE', path, body);

/** Encodes each path segment: names come from users. */
export const segment = (value: string): string => encodeURIComponent(value);
