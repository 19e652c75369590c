// The only place that writes to a uWS response. Every write is corked (a write after an await
// is otherwise one syscall per call), nothing is written after the client aborted, and streams
// respect tryEnd's backpressure.
import type { HttpResponse } from 'uWebSockets.js';
import { isApiError } from '../protocol/threadFace.js';
import type { Headers, Reply } from './reply.js';

const STATUS_TEXT: Record<number, string> = {
  200: 'OK', 201: 'Created', 204: 'No Content', 206: 'Partial Content', 301: 'Moved Permanently',
  302: 'Found', 304: 'Not Modified', 307: 'Temporary Redirect', 400: 'Bad Request', 401: 'Unauthorized',
  403: 'Forbidden', 404: 'Not Found', 405: 'Method Not Allowed', 409: 'Conflict', 410: 'Gone',
  413: 'Payload Too Large', 415: 'Unsupported Media Type', 416: 'Range Not Satisfiable',
  422: 'Unprocessable Entity', 429: 'Too Many Requests', 500: 'Internal Server Error',
  503: 'Service Unavailable',
};

export const statusLine = (status: number): string => `${status} ${STATUS_TEXT[status] ?? 'Status'}`;
const STATUS_LINES = new Map(Object.keys(STATUS_TEXT).map((s) => [Number(s), statusLine(Number(s))]));

/** Tracks whether a response may still be written; the router calls abort() from onAborted. */
export class ResponseState {
  aborted = false;
  done = false;
  /** made on first use: most requests are answered without anyone listening */
  private abortListeners: Set<() => void> | null = null;

  abort(): void {
    this.aborted = true;
    if (this.abortListeners === null) return;
    // Called from uWS's onAborted, which does not drain microtasks: hop to a macrotask.
    const listeners = [...this.abortListeners];
    this.abortListeners.clear();
    if (listeners.length > 0) setImmediate(() => listeners.forEach((l) => l()));
  }

  onAbort(listener: () => void): () => void {
    const listeners = (this.abortListeners ??= new Set());
    listeners.add(listener);
    return () => listeners.delete(listener);
  }
}

/** Runs `fn` corked and hands back its result. */
const corked = <T>(res: HttpResponse, fn: () => T): T => {
  let out!: T;
  res.cork(() => {
    out = fn();
  });
  return out;
};

/**
 * Headers every answer of this thread carries, set once at start (useQuic's Alt-Svc). A process
 * setting (tests that run several servers in one process share it), as the option is the server's.
 */
let alwaysHeaders: readonly (readonly [string, string])[] = [];

export function setAlwaysHeaders(headers: Headers): void {
  alwaysHeaders = Object.entries(headers);
}

function writeHead(res: HttpResponse, status: number, headers: Headers): void {
  res.writeStatus(STATUS_LINES.get(status) ?? statusLine(status));
  for (const k in headers) res.writeHeader(k, headers[k]!);
  for (const [k, v] of alwaysHeaders) res.writeHeader(k, v);
}

const JSON_TYPE = 'application/json';

/**
 * Ends a response that has no body: a HEAD answer (the length a GET would send) or an empty reply.
 * Not endWithoutBody(length): uWS then waits for `length` bytes that never come, so the response
 * stays unfinished (measured: the connection is closed at the client's next request, and without
 * onAborted uWS aborts the process). The length is written as a header instead, and a connection
 * to close says so in a header (endWithoutBody's own close flag comes only with a length).
 */
function endWithoutBody(res: HttpResponse, length: number, closeConnection: boolean): void {
  res.writeHeader('Content-Length', String(length));
  if (closeConnection) res.writeHeader('Connection', 'close');
  res.endWithoutBody();
}

function writeComplete(res: HttpResponse, reply: Reply, head: boolean, closeConnection: boolean): void {
  if (reply.kind === 'empty') {
    writeHead(res, reply.status, reply.headers);
    endWithoutBody(res, reply.length ?? 0, closeConnection);
    return;
  }
  if (reply.kind !== 'json' && reply.kind !== 'bytes') return;
  // uWS takes a string as UTF-8 itself: no Buffer made per reply.
  const body = reply.kind === 'json' ? JSON.stringify(reply.body) : reply.body;
  writeHead(res, reply.status, reply.headers);
  if (reply.kind === 'json' && reply.headers['Content-Type'] === undefined) res.writeHeader('Content-Type', JSON_TYPE);
  if (head) endWithoutBody(res, typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength, closeConnection);
  else res.end(body, closeConnection);
}

/**
 * Writes a reply that is complete in memory (json, bytes, empty) and says true, or says false for a
 * streamed one. Inside a uWS request callback it needs no cork: uWS corks the callback itself.
 * (No closures named per call here: tsx's keepNames makes each one a defineProperty.)
 */
export function respondComplete(res: HttpResponse, state: ResponseState, reply: Reply, head: boolean, closeConnection = false, inCallback = false): boolean {
  if (reply.kind === 'stream' || reply.kind === 'chunked') return false;
  if (state.aborted || state.done) return true;
  if (inCallback) writeComplete(res, reply, head, closeConnection);
  else res.cork(() => writeComplete(res, reply, head, closeConnection));
  state.done = true;
  return true;
}

/** Writes a lane's reply (router.ts Lane) inside its uWS callback; false for a streamed one, which a lane may not give. */
export function respondInCallback(res: HttpResponse, reply: Reply): boolean {
  if (reply.kind === 'stream' || reply.kind === 'chunked') return false;
  writeComplete(res, reply, false, false);
  return true;
}

/**
 * Writes a reply complete in memory (json or bytes) but leaves the response open, its body sent as
 * one chunk: uWS's response object is unusable once ended, and the connection can then no longer be
 * closed on our schedule (drain.ts). endHeld finishes it (the last chunk); closeHeld gives up on it.
 * (Not `Connection: close`: uWS writes a second such header, into the body, when it ends the response.)
 */
export function respondHeld(res: HttpResponse, state: ResponseState, reply: Reply): void {
  if (state.aborted || state.done || (reply.kind !== 'json' && reply.kind !== 'bytes')) return;
  const body = reply.kind === 'json' ? JSON.stringify(reply.body) : reply.body;
  res.cork(() => {
    writeHead(res, reply.status, reply.headers);
    if (reply.kind === 'json' && reply.headers['Content-Type'] === undefined) res.writeHeader('Content-Type', JSON_TYPE);
    res.write(body);
  });
}

/** Ends a response respondHeld began; the connection stays open. */
export function endHeld(res: HttpResponse, state: ResponseState): void {
  if (state.aborted || state.done) return;
  state.done = true;
  res.cork(() => res.end());
}

/** Closes the connection of a response respondHeld began, leaving it unfinished. */
export function closeHeld(res: HttpResponse, state: ResponseState): void {
  if (state.aborted || state.done) return;
  state.done = true;
  res.close();
}

/**
 * Begins a body complete in memory (a kept NAR file) inside uWS's handler, which corks it: the head
 * and what the socket takes now, with tryEnd, so that uWS copies none of what the socket does not
 * take (end() would, for every slow reader; review r7a-1). Says how many body bytes the socket took:
 * all of them, or respondRest sends the rest.
 */
export function beginBytesInCallback(res: HttpResponse, status: number, headers: Headers, body: Uint8Array): number {
  writeHead(res, status, headers);
  return res.tryEnd(body, body.byteLength)[1] ? body.byteLength : res.getWriteOffset();
}

/** Sends the rest of a body beginBytesInCallback began, `taken` of its `total` bytes sent, with backpressure. */
export async function respondRest(res: HttpResponse, state: ResponseState, total: number, taken: number, rest: AsyncIterable<Uint8Array>): Promise<void> {
  if (state.aborted || state.done) return;
  await writeStream(res, state, 0, {}, total, rest, taken);
}

/** Writes a complete reply. `head` answers a HEAD request: headers and length, no body. */
export async function respond(res: HttpResponse, state: ResponseState, reply: Reply, head: boolean, closeConnection = false): Promise<void> {
  if (respondComplete(res, state, reply, head, closeConnection)) return;
  if (state.aborted || state.done) return;
  switch (reply.kind) {
    case 'stream':
      if (head) {
        res.cork(() => {
          writeHead(res, reply.status, reply.headers);
          endWithoutBody(res, reply.length, closeConnection);
        });
        state.done = true;
        return;
      }
      await writeStream(res, state, reply.status, reply.headers, reply.length, reply.body);
      return;
    case 'chunked':
      if (head) {
        // The head a GET sends: chunked, no length (res.end() would claim Content-Length: 0). Without
        // a length, endWithoutBody finishes the response and the connection serves the next request.
        res.cork(() => {
          writeHead(res, reply.status, reply.headers);
          res.writeHeader('Transfer-Encoding', 'chunked');
          if (closeConnection) res.writeHeader('Connection', 'close');
          res.endWithoutBody();
        });
        state.done = true;
        return;
      }
      await writeChunked(res, state, reply.status, reply.headers, reply.body);
  }
}

/**
 * Streams a body of unknown length with chunked encoding. uWS keeps what write() could not send,
 * so on backpressure the next chunk waits for onWritable instead of piling up in memory.
 */
const CHUNKED_SLICE = 256 * 1024;

async function writeChunked(res: HttpResponse, state: ResponseState, status: number, headers: Headers, body: AsyncIterable<Uint8Array>): Promise<void> {
  const iterator = body[Symbol.asyncIterator]();
  let headWritten = false;
  const head = () => {
    if (!headWritten) writeHead(res, status, headers);
    headWritten = true;
  };
  try {
    for (;;) {
      const next = await iterator.next();
      if (state.aborted) return;
      if (next.done) break;
      // A source may hand over a large piece at once (a live log's backlog): written in slices,
      // each after the last one drained, so uWS never holds more than a slice beyond the socket.
      for (let at = 0; at < next.value.byteLength; at += CHUNKED_SLICE) {
        const slice = next.value.subarray(at, at + CHUNKED_SLICE);
        const ok = corked(res, () => {
          head();
          return res.write(slice);
        });
        if (!ok) await writable(res, state);
        if (state.aborted) return;
      }
    }
    corked(res, () => {
      head();
      res.end();
    });
    state.done = true;
  } finally {
    // Before the head, a failing source is still an ordinary error reply (the router writes it);
    // mid-body, closing the connection is the only honest signal left.
    if (headWritten && !state.done && !state.aborted) {
      state.done = true;
      res.cork(() => res.close());
    }
    await iterator.return?.();
  }
}

/** Resolves when uWS has sent what write() buffered, or the client is gone. */
function writable(res: HttpResponse, state: ResponseState): Promise<void> {
  return new Promise((resolve) => {
    const unsubscribe = state.onAbort(resolve);
    res.onWritable(() => {
      unsubscribe();
      setImmediate(resolve); // uWS does not drain microtasks after its callbacks
      return true;
    });
  });
}

/** Streams `total` bytes, waiting on onWritable whenever uWS reports backpressure; `begun`: the head and that many bytes were written already. */
async function writeStream(
  res: HttpResponse, state: ResponseState, status: number, headers: Headers, total: number, body: AsyncIterable<Uint8Array>, begun: number | null = null,
): Promise<void> {
  let headWritten = begun !== null;
  let refusedBeforeHead = false;
  let sent = begun ?? 0;
  const iterator = body[Symbol.asyncIterator]();
  try {
    for (;;) {
      let next: IteratorResult<Uint8Array>;
      try {
        next = await iterator.next();
      } catch (e) {
        // A refusal before the first byte (say, no storage read place in time) is still an answer:
        // the caller writes its envelope, as for any refusal, instead of a closed connection.
        if (!headWritten && isApiError(e)) refusedBeforeHead = true;
        throw e;
      }
      if (state.aborted) return;
      if (next.done) break;
      const chunk = next.value;
      if (sent + chunk.byteLength > total) throw new Error(`stream produced more than its declared ${total} bytes`);
      const { ok, finished, from } = corked(res, () => {
        if (!headWritten) {
          writeHead(res, status, headers);
          headWritten = true;
        }
        const from = res.getWriteOffset();
        const [ok, finished] = res.tryEnd(chunk, total);
        return { ok, finished, from };
      });
      sent += chunk.byteLength;
      if (finished) {
        state.done = true;
        return;
      }
      if (!ok) await drain(res, state, chunk, from, total);
    }
    if (state.aborted || state.done) return;
    if (total === 0) {
      corked(res, () => {
        writeHead(res, status, headers);
        res.end();
      });
      state.done = true;
      return;
    }
    throw new Error(`stream ended after ${sent} of ${total} bytes`);
  } finally {
    if (!state.done && !state.aborted && !refusedBeforeHead) {
      // A source that broke mid-body: closing the connection is the only honest signal left.
      state.done = true;
      res.cork(() => res.close());
    }
    await iterator.return?.();
  }
}

/** Resolves once the pending chunk is fully handed to uWS, or the client is gone. */
function drain(res: HttpResponse, state: ResponseState, chunk: Uint8Array, from: number, total: number): Promise<void> {
  return new Promise((resolve) => {
    const unsubscribe = state.onAbort(resolve);
    res.onWritable((offset) => {
      const [ok, finished] = res.tryEnd(chunk.subarray(offset - from), total);
      if (finished) state.done = true;
      if (ok || finished) {
        unsubscribe();
        setImmediate(resolve); // uWS does not drain microtasks after its callbacks
      }
      return ok;
    });
  });
}
