// A serving thread hands a request it cannot answer from memory to the main thread's loopback
// listener, streaming both ways with backpressure (docs/http.md, "Serving threads"): the request
// body is read from uWS and written to a keep-alive node:http connection, pausing uWS while the
// connection's buffer is full; the answer is written back with tryEnd/write, pausing the
// connection while uWS's buffer is full.
import { Agent, request as httpRequest, type IncomingMessage } from 'node:http';
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { requestFraming } from '../framing.js';
import { FORWARDED_PEER_HEADER, forwardedPeerValue } from './forwardedPeer.js';

/** Request headers that belong to one connection, not to the request (RFC 9110 §7.6.1), and the thread's own. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'upgrade', 'te', 'trailer', 'proxy-connection', FORWARDED_PEER_HEADER]);
/** Answer headers uWS writes itself, or that belong to the loopback connection. */
/** the largest answer that closes its connection taken whole before it is sent (refusals are small) */
const CLOSING_ANSWER_MAX_BYTES = 64 * 1024;
const ANSWER_SKIP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'date', 'uwebsockets']);

export interface ForwardOrigin {
  port: number;
  secret: string;
  agent: Agent;
  /**
   * node:http's buffer per loopback request (its default, 64 KiB, when unset). Tests set it small: a
   * pause then needs a request that fits one loopback segment (relayedBodyEnd.test.ts).
   */
  highWaterMark?: number;
}

export interface ForwardedAnswer {
  status: number;
  headers: IncomingMessage['headers'];
  body: Buffer;
}

/**
 * Idle loopback connections are dropped after 4 s, before uWS closes them at 10 s (its HTTP idle
 * timeout): a request sent on a connection the main thread is closing meets a reset, and one with
 * a body (an upload) cannot be sent again. (`timeout` destroys only free sockets; on a request in
 * flight it is an event nobody listens to.)
 */
export const originAgent = (): Agent => new Agent({ keepAlive: true, maxSockets: 256, maxFreeSockets: 64, timeout: 4_000 });

const remoteAddress = (res: HttpResponse): string => Buffer.from(res.getRemoteAddressAsText()).toString();

/** What forwarding needs of a request, copied while uWS's HttpRequest is valid. */
export interface CapturedRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  hasBody: boolean;
}

export interface LearnAnswer {
  maxBytes: number;
  done: (answer: ForwardedAnswer) => void;
}

/**
 * Forwards one request. `learn`, when given, receives the whole answer of a small complete GET
 * (at most `learnBytes`) after it was written, for the thread's hot memory.
 */
export function forwardHttp(res: HttpResponse, req: HttpRequest, origin: ForwardOrigin, learn?: LearnAnswer): void {
  const captured = captureRequest(res, req, origin);
  if (captured !== null) forwardCaptured(res, captured, origin, learn);
}

/**
 * Copies what forwarding needs from `req` (invalid once the uWS callback returns). A request whose
 * framing is in doubt is answered here (400, connection closed) and null returned.
 */
export function captureRequest(res: HttpResponse, req: HttpRequest, origin: ForwardOrigin): CapturedRequest | null {
  const method = req.getMethod().toUpperCase();
  const query = req.getQuery();
  const path = query ? `${req.getUrl()}?${query}` : req.getUrl();
  const headers: Record<string, string> = {};
  req.forEach((k, v) => {
    if (!HOP_BY_HOP.has(k)) headers[k] = headers[k] === undefined ? v : `${headers[k]}, ${v}`;
  });
  const framing = requestFraming(req.getHeader('content-length') || undefined, req.getHeader('transfer-encoding') || undefined);
  if (!framing.ok) {
    // As the main thread's catch-all answers it: where this body ends is in doubt, so the connection closes.
    res.cork(() => res.writeStatus('400 Bad Request').writeHeader('Content-Type', 'application/json')
      .end(JSON.stringify({ error: true, message: framing.problem, code: 'invalid_framing' }), true));
    return null;
  }
  headers[FORWARDED_PEER_HEADER] = forwardedPeerValue(origin.secret, remoteAddress(res));
  const hasBody = framing.length !== null ? framing.length > 0 : req.getHeader('transfer-encoding') !== '';
  if (framing.length !== null) headers['content-length'] = String(framing.length);
  return { method, path, headers, hasBody };
}

/**
 * Sends a captured request to the main thread and its answer back to the client. Within the uWS
 * callback for any request; after it (the client's connection still open) only for one without a
 * body, whose bytes uWS would not hold for a handler registered late.
 */
export function forwardCaptured(res: HttpResponse, captured: CapturedRequest, origin: ForwardOrigin, learn?: LearnAnswer): void {
  const { method, path, headers, hasBody } = captured;
  let aborted = false;
  let finished = false;
  const upstream = httpRequest({
    host: '127.0.0.1', port: origin.port, method, path, headers, agent: origin.agent,
    ...(origin.highWaterMark === undefined ? {} : { highWaterMark: origin.highWaterMark }),
  });
  res.onAborted(() => {
    aborted = true;
    upstream.destroy();
  });
  /**
   * Whether the client's socket is paused. Chunks uWS already read still arrive after pause(), the
   * last one included; then node:http never emits 'drain' (not after end()), and the socket is
   * resumed only just before the answer's last write (`release`): uWS's resume() arms its 10 s
   * timeout, which would cut a slow answer, and a socket left paused after the answer never reads
   * the connection's next request (the idle timeout then resets it under the client: issue 22's
   * relayed-upload resets).
   */
  let paused = false;
  let bodyEnded = !hasBody;
  const release = (): void => {
    if (!paused || aborted) return;
    paused = false;
    res.resume();
  };
  if (hasBody) {
    res.onData((chunk, last) => {
      // uWS reuses the chunk's memory after this call returns: copy it.
      const more = upstream.write(Buffer.from(chunk.slice(0)));
      if (last) {
        bodyEnded = true;
        upstream.end();
      } else if (!more && !paused && !finished) {
        // One wait for drain, not one per chunk.
        paused = true;
        res.pause();
        upstream.once('drain', () => {
          if (!bodyEnded) release();
        });
      }
    });
  } else upstream.end();

  upstream.on('error', () => {
    if (aborted || finished) return;
    finished = true;
    release();
    res.cork(() => res.writeStatus('502 Bad Gateway').writeHeader('Content-Type', 'application/json')
      .end(JSON.stringify({ error: true, message: 'the main thread did not answer', code: 'internal' }), true));
  });

  upstream.on('response', (answer) => {
    if (aborted) {
      answer.destroy();
      return;
    }
    const status = answer.statusCode ?? 502;
    const length = answer.headers['content-length'] === undefined ? null : Number(answer.headers['content-length']);
    const headOnly = method === 'HEAD' || status === 204 || status === 304;
    const closeAfter = answer.headers['connection'] === 'close';
    const writeHead = () => {
      res.writeStatus(`${status} ${answer.statusMessage ?? ''}`);
      for (const [k, v] of Object.entries(answer.headers)) {
        if (ANSWER_SKIP.has(k) || v === undefined) continue;
        for (const one of Array.isArray(v) ? v : [v]) res.writeHeader(k, one);
      }
    };
    if (headOnly) {
      finished = true;
      release();
      res.cork(() => {
        writeHead();
        if (length !== null) res.writeHeader('Content-Length', String(length));
        // a HEAD tells the framing its GET would have: a streamed answer's is chunked, with no length
        else if (answer.headers['transfer-encoding'] === 'chunked') res.writeHeader('Transfer-Encoding', 'chunked');
        if (closeAfter) res.writeHeader('Connection', 'close');
        res.endWithoutBody();
      });
      answer.resume();
      return;
    }
    // An answer that closes its connection (a refusal cutting a body short: 408 upload_too_slow, 413)
    // goes out whole with end(…, close), as the main thread sends it: tryEnd has no close, and the
    // client, still sending its body, would wait for the close for ever. Such an answer is not learned.
    const closing: Buffer[] | null = closeAfter && length !== null && length <= CLOSING_ANSWER_MAX_BYTES ? [] : null;
    const keep: Buffer[] | null = closing === null && learn !== undefined && length !== null && length <= learn.maxBytes ? [] : null;
    let headWritten = false;
    let sent = 0;
    answer.on('data', (chunk: Buffer) => {
      if (aborted) return;
      if (closing !== null) {
        closing.push(chunk);
        return;
      }
      keep?.push(chunk);
      res.cork(() => {
        if (!headWritten) {
          writeHead();
          headWritten = true;
        }
        if (length !== null) {
          if (sent + chunk.length >= length) release();
          const offset = res.getWriteOffset();
          const [ok, done] = res.tryEnd(chunk, length);
          sent += chunk.length;
          if (done) finished = true;
          else if (!ok) {
            // uWS kept what it could not write: the rest of this chunk goes from onWritable.
            answer.pause();
            res.onWritable((at) => {
              const [ok2, done2] = res.tryEnd(chunk.subarray(at - offset), length);
              if (done2) finished = true;
              if (ok2) answer.resume();
              return ok2;
            });
          }
        } else if (!res.write(chunk)) {
          answer.pause();
          res.onWritable(() => {
            answer.resume();
            return true;
          });
        }
      });
    });
    answer.on('end', () => {
      if (aborted) return;
      if (!finished) release();
      if (closing !== null) {
        finished = true;
        res.cork(() => {
          writeHead();
          res.end(Buffer.concat(closing), true);
        });
      } else if (length === null) {
        finished = true;
        res.cork(() => {
          if (!headWritten) writeHead();
          res.end(undefined, closeAfter);
        });
      } else if (!headWritten) {
        finished = true;
        res.cork(() => {
          writeHead();
          res.end(undefined, closeAfter);
        });
      } else if (sent < length) res.close(); // the origin ended short: the only honest signal left
      if (keep !== null && learn !== undefined) learn.done({ status, headers: answer.headers, body: Buffer.concat(keep) });
    });
    answer.on('error', () => {
      if (!aborted && !finished) res.close();
    });
  });
}
