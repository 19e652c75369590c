// What a handler may return besides a plain value (which becomes `{error: false, message}`).
// Route files build replies; only http/respond.ts turns them into bytes on a uWS response.

import type { ApiError } from '../protocol/index.js';

export type Headers = Record<string, string>;

// The tag is part of each literal (not added afterwards): replies are made on every request, and
// adding a symbol property to a finished object is a slow shape change in V8.
const REPLY = Symbol('kiln.reply');

export type Reply = { readonly [REPLY]: true } & (
  | { kind: 'json'; status: number; headers: Headers; body: unknown }
  | { kind: 'bytes'; status: number; headers: Headers; body: Uint8Array | string }
  | { kind: 'stream'; status: number; headers: Headers; length: number; body: AsyncIterable<Uint8Array> }
  | { kind: 'chunked'; status: number; headers: Headers; body: AsyncIterable<Uint8Array> }
  | { kind: 'empty'; status: number; headers: Headers; length?: number }
);

export const isReply = (v: unknown): v is Reply => typeof v === 'object' && v !== null && REPLY in v;

/** The envelope of a success, with a status other than 200 or extra headers. */
export const jsonReply = (status: number, message: unknown, headers: Headers = {}): Reply =>
  ({ [REPLY]: true, kind: 'json', status, headers, body: { error: false, message } });

/**
 * The envelope of a refusal: `{error: true, message, code}` with the code's status and the error's
 * headers. Only http/server.ts calls it: everything else throws the ApiError.
 */
export const errorReply = (e: ApiError): Reply =>
  ({ [REPLY]: true, kind: 'json', status: e.status, headers: { ...e.headers }, body: { error: true, message: e.message, code: e.code } });

/** Bytes with their own content type (narinfo text, a NAR slice, a listing). */
export const bytesReply = (status: number, body: Uint8Array | string, headers: Headers = {}): Reply =>
  ({ [REPLY]: true, kind: 'bytes', status, headers, body });

/** A body of known length produced piece by piece; written with backpressure. */
export const streamReply = (status: number, length: number, body: AsyncIterable<Uint8Array>, headers: Headers = {}): Reply =>
  ({ [REPLY]: true, kind: 'stream', status, headers, length, body });

/** A body of unknown length (NDJSON, a live log): chunked transfer encoding, written with backpressure. */
export const chunkedReply = (status: number, body: AsyncIterable<Uint8Array>, headers: Headers = {}): Reply =>
  ({ [REPLY]: true, kind: 'chunked', status, headers, body });

/** No body; `length` is reported as Content-Length (HEAD, 304, redirects). */
export const emptyReply = (status: number, headers: Headers = {}, length?: number): Reply =>
  ({ [REPLY]: true, kind: 'empty', status, headers, ...(length === undefined ? {} : { length }) });
