import http from 'node:http';
import https from 'node:https';

// Sending one signed envelope to a receiver: a POST with keep-alive connections, bounded in time
// (the whole exchange) and in what is read back. Redirects are not followed: a 3xx is a failure,
// so a receiver cannot send kiln's signed body somewhere else.

export interface WebRequest {
  url: string;
  body: string;
  headers: Readonly<Record<string, string>>;
}

export interface SendOutcome {
  ok: boolean;
  /** the receiver's status; absent when no response came (transport error, timeout) */
  status?: number;
  /** what went wrong, in words */
  error?: string;
  /** the first bytes of the response body */
  excerpt?: string;
}

export interface WebRequestSender {
  send(request: WebRequest): Promise<SendOutcome>;
  close(): void;
}

export interface WebRequestSenderOptions {
  /** the whole exchange: connect, send, status and excerpt (default 10 s) */
  timeoutMs?: number;
  /** open connections per receiver host (default 128) */
  maxSockets?: number;
}

const EXCERPT_BYTES = 1024;
// A receiver that keeps talking is cut off here; the rest is not read.
const MAX_RESPONSE_BYTES = 64 * 1024;

export function createWebRequestSender(opts: WebRequestSenderOptions = {}): WebRequestSender {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const agentOptions = { keepAlive: true, maxSockets: opts.maxSockets ?? 128, scheduling: 'lifo' as const };
  const agents = { http: new http.Agent(agentOptions), https: new https.Agent(agentOptions) };

  function send(request: WebRequest): Promise<SendOutcome> {
    return new Promise((resolve) => {
      let settled = false;
      const finish = (outcome: SendOutcome) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(outcome);
      };
      let url: URL;
      try {
        url = new URL(request.url);
      } catch {
        finish({ ok: false, error: `not a URL: ${request.url.slice(0, 200)}` });
        return;
      }
      const secure = url.protocol === 'https:';
      const body = Buffer.from(request.body);
      const req = (secure ? https : http).request(url, {
        method: 'POST',
        agent: secure ? agents.https : agents.http,
        headers: { ...request.headers, 'content-length': String(body.length) },
      });
      const timer = setTimeout(() => {
        req.destroy();
        finish({ ok: false, error: `no complete answer within ${timeoutMs} ms` });
      }, timeoutMs);
      req.on('error', (err) => finish({ ok: false, error: transportError(err) }));
      req.on('response', (res) => {
        const status = res.statusCode ?? 0;
        const chunks: Buffer[] = [];
        let read = 0;
        res.on('data', (chunk: Buffer) => {
          if (read < EXCERPT_BYTES) chunks.push(chunk);
          read += chunk.length;
          if (read > MAX_RESPONSE_BYTES) res.destroy();
        });
        const done = () => {
          const excerpt = Buffer.concat(chunks).subarray(0, EXCERPT_BYTES).toString('utf8');
          const ok = status >= 200 && status < 300;
          finish({ ok, status, excerpt, ...(ok ? {} : { error: `the receiver answered ${status}` }) });
        };
        res.on('end', done);
        res.on('close', done);
        res.on('error', done);
      });
      req.end(body);
    });
  }

  return {
    send,
    close() {
      agents.http.destroy();
      agents.https.destroy();
    },
  };
}

function transportError(err: Error & { code?: string }): string {
  return err.code ? `${err.code}: ${err.message}` : err.message;
}
