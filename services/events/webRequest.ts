// Sending one signed envelope to a receiver: a POST with keep-alive connections, bounded in time
// (the whole exchange) and in what is read back. Redirects are not followed: a 3xx is a failure,
// so a receiver cannot send kiln's signed body somewhere else. Connections go through the
// outbound client, so a receiver on a refused address (outbound.allowedNetworks) is never reached.
// Only the status and a short excerpt of the answer are kept: the delivery history is readable
// by the webhook's owner, and must not become a way to read what some other server says.
import type { ClientRequest } from 'node:http';
import type { OutboundClient } from '../../storage/index.js';

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
  /** connects where outbound.allowedNetworks allows; its agents bound connections per host */
  client: OutboundClient;
  /** the whole exchange: connect, send, status and excerpt (default 10 s) */
  timeoutMs?: number;
}

const EXCERPT_BYTES = 256;
// A receiver that keeps talking is cut off here; the rest is not read.
const MAX_RESPONSE_BYTES = 64 * 1024;

export function createWebRequestSender(opts: WebRequestSenderOptions): WebRequestSender {
  const timeoutMs = opts.timeoutMs ?? 10_000;

  function send(request: WebRequest): Promise<SendOutcome> {
    return new Promise((resolve) => {
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
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
      const body = Buffer.from(request.body);
      let req: ClientRequest;
      try {
        req = opts.client.request(url, { method: 'POST', headers: { ...request.headers, 'content-length': String(body.length) } });
      } catch (err) {
        // a refused IP literal: nothing was sent
        finish({ ok: false, error: transportError(err instanceof Error ? err : new Error(String(err))) });
        return;
      }
      timer = setTimeout(() => {
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
          const excerpt = excerptOf(Buffer.concat(chunks));
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
      // the agents belong to the outbound client, closed by its owner
    },
  };
}

/** The first EXCERPT_BYTES of an answer as text, without a character cut in half. */
function excerptOf(bytes: Buffer): string {
  return new TextDecoder('utf-8', { fatal: false }).decode(bytes.subarray(0, EXCERPT_BYTES)).replace(/\uFFFD$/, '');
}

function transportError(err: Error & { code?: string }): string {
  return err.code ? `${err.code}: ${err.message}` : err.message;
}
