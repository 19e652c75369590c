// Live updates: one of the API's WebSockets (/api/v1/evals/{id}/live, /builds/{id}/live, …),
// one event envelope per frame, reconnecting with a growing pause while the page wants it.
import type { Envelope } from '$protocol/events/envelope';
import { API } from './api';
import { sessionToken } from './session';

/** What each frame carries: the event envelope of the API spec (protocol/events). */
export type LiveEvent = Envelope;

export interface LiveOptions {
  /** query parameters, e.g. { events: 'build.*' } for the firehose */
  query?: Record<string, string>;
  onEvent(event: LiveEvent): void;
  /** told on every (re)connect and loss, so a page can show "live" or "reconnecting" */
  onState?(state: 'connecting' | 'open' | 'closed'): void;
}

const isLiveEvent = (v: unknown): v is LiveEvent =>
  typeof v === 'object' && v !== null && 'event' in v && typeof v.event === 'string' && 'content' in v;

/**
 * Opens `path` (under /api/v1, e.g. `/evals/<id>/live`) and keeps it open until the returned
 * function is called. A browser cannot set an Authorization header on a WebSocket, so the token
 * goes as the `token` query parameter the live sockets accept.
 */
export function live(path: string, options: LiveOptions): () => void {
  let socket: WebSocket | null = null;
  let stopped = false;
  let pause = 500;
  let timer: ReturnType<typeof setTimeout> | undefined;

  const open = (): void => {
    const params = new URLSearchParams(options.query);
    const token = sessionToken();
    if (token) params.set('token', token);
    const url = new URL(API + path, window.location.href);
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    url.search = params.toString();
    options.onState?.('connecting');
    socket = new WebSocket(url);
    socket.onopen = () => {
      pause = 500;
      options.onState?.('open');
    };
    socket.onmessage = (m) => {
      if (typeof m.data !== 'string') return;
      const parsed: unknown = JSON.parse(m.data);
      if (isLiveEvent(parsed)) options.onEvent(parsed);
    };
    socket.onclose = () => {
      options.onState?.('closed');
      if (stopped) return;
      timer = setTimeout(open, pause);
      pause = Math.min(pause * 2, 15_000);
    };
  };
  open();
  return () => {
    stopped = true;
    clearTimeout(timer);
    socket?.close();
  };
}
