// The client end of a live WebSocket (`/api/v1/evals/{id}/live`, `/builds/{id}/live`, …; docs/events.md):
// the Bearer token in the upgrade request, one event envelope per frame. A refused upgrade (an
// HTTP error with the JSON envelope) or a refusal after opening (close code 4000 + the HTTP
// status, reason "<code>: <message>") becomes an ApiRequestError like any refused call.
import type { IncomingMessage } from 'node:http';
import type { RawData } from 'ws';
import { ApiRequestError } from './apiClient.js';
import type { ClientSettings } from './clientConfig.js';

export interface LiveEvent {
  event: string;
  at: string;
  content: Record<string, unknown>;
}

export interface LiveSocket {
  /** settles when the server said stream.open (the feed is subscribed), or fails with why it refused */
  readonly opened: Promise<void>;
  /** settles when the socket closed; a refusal after opening fails it */
  readonly closed: Promise<void>;
  close(): void;
}

/** The refusal a close code of 4000 + status carries, else null (an ordinary close). */
function closeRefusal(code: number, reason: string): ApiRequestError | null {
  if (code < 4000 || code > 4999) return null;
  const colon = reason.indexOf(': ');
  const [errorCode, message] = colon > 0 ? [reason.slice(0, colon), reason.slice(colon + 2)] : ['error', reason || `the server closed the live socket with code ${code}`];
  return new ApiRequestError(code - 4000, errorCode, message, new Headers());
}

function refusedUpgrade(res: IncomingMessage, what: string): Promise<ApiRequestError> {
  return new Promise((resolve) => {
    let text = '';
    res.setEncoding('utf8');
    res.on('data', (piece: string) => (text += piece));
    res.on('close', () => {
      let message = `${what}: the server answered ${res.statusCode}`;
      let code = 'error';
      try {
        const envelope = JSON.parse(text) as { message?: unknown; code?: unknown };
        if (typeof envelope.message === 'string') message = envelope.message;
        if (typeof envelope.code === 'string') code = envelope.code;
      } catch {
        // not the envelope: the status says it
      }
      resolve(new ApiRequestError(res.statusCode ?? 0, code, message, new Headers()));
    });
  });
}

export async function openLiveSocket(settings: ClientSettings, path: string, onEvent: (event: LiveEvent) => void): Promise<LiveSocket> {
  // ws is loaded when a command watches, not by every kiln process (`kiln serve` included)
  const { default: WebSocket } = await import('ws');
  const url = `${settings.server.replace(/^http/i, 'ws')}/api/v1${path}`;
  const ws = new WebSocket(url, { headers: { authorization: `Bearer ${settings.token}` } });
  let open!: { resolve: () => void; reject: (e: Error) => void };
  let done!: { resolve: () => void; reject: (e: Error) => void };
  const opened = new Promise<void>((resolve, reject) => (open = { resolve, reject }));
  const closed = new Promise<void>((resolve, reject) => (done = { resolve, reject }));
  // Whoever awaits only one of them must not leave the other's failure unhandled.
  opened.catch(() => undefined);
  closed.catch(() => undefined);
  let failure: Error | null = null;
  ws.on('unexpected-response', (_req, res) => {
    void refusedUpgrade(res, `GET ${path}`).then((e) => {
      failure = e;
      open.reject(e);
      done.reject(e);
      ws.terminate();
    });
  });
  ws.on('message', (data: RawData) => {
    let frame: LiveEvent;
    try {
      frame = JSON.parse(data.toString()) as LiveEvent;
    } catch {
      return; // not an envelope: nothing kiln sends
    }
    if (frame.event === 'stream.open') open.resolve();
    onEvent(frame);
  });
  ws.on('error', (e) => {
    failure ??= new Error(`cannot reach the kiln server at ${settings.server}: ${e.message}`, { cause: e });
  });
  ws.on('close', (code, reason) => {
    const refusal = closeRefusal(code, reason.toString());
    const error = refusal ?? failure ?? new Error(`the live socket closed (code ${code}) before the server opened the feed`);
    open.reject(error);
    if (refusal ?? failure) done.reject(refusal ?? failure!);
    else done.resolve();
  });
  return { opened, closed, close: () => ws.close(1000) };
}
