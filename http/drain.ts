// Refusing a request while its body is still coming (a 413, or any error before the body was read).
// Closing at once leaves unread bytes in the socket, the kernel answers them with a TCP reset, and a
// client still writing its body gets EPIPE and never reads the answer. So (RFC 9112 §9.6) the answer
// is written at once and the rest of the body is read and dropped, within bounds.
import type { HttpResponse } from 'uWebSockets.js';
import type { Reply } from './reply.js';
import { closeHeld, endHeld, respondComplete, respondHeld, type ResponseState } from './respond.js';

export interface DrainBounds {
  /** body bytes read and dropped after the answer before the connection is closed anyway */
  bytes: number;
  /** milliseconds after the answer before the connection is closed anyway */
  ms: number;
  /** runs `fn` after `ms` and gives back a cancel (a test's clock; setTimeout otherwise) */
  timer?: (fn: () => void, ms: number) => () => void;
}

// 64 MiB: past the 20 MiB cap of direct-build uploads, so a client sending one whole still reads its 413.
export const DEFAULT_DRAIN: DrainBounds = { bytes: 64 << 20, ms: 5_000 };

const realTimer = (fn: () => void, ms: number): (() => void) => {
  const t = setTimeout(fn, ms);
  t.unref();
  return () => clearTimeout(t);
};

const ignore = (): void => undefined;

/**
 * Answers `reply` (complete in memory) while the body is still arriving, and drops the rest of the
 * body. `stopReading` makes the body's reader let go (and resume a socket it paused); this takes over
 * the request's onData.
 *
 * A declared length within `bounds.bytes`: the answer is ended at once, uWS reads the rest (its idle
 * timeout ends a client that stalls) and the connection stays usable. Otherwise the end of the body
 * is unknown or far: the answer is written but held open (uWS's response cannot be closed once ended),
 * ended when the body ends, and the connection closed unfinished after `bytes` more bytes or `ms`.
 */
export function refuseWhileDraining(res: HttpResponse, state: ResponseState, reply: Reply, bounds: DrainBounds, declared: number | null, stopReading: () => void): void {
  if (state.aborted || state.done) return;
  stopReading();
  if (declared !== null && declared <= bounds.bytes) {
    res.onData(ignore);
    respondComplete(res, state, reply, false);
    return;
  }
  respondHeld(res, state, reply);
  let dropped = 0;
  let cancelTimer = ignore;
  const stopListening = state.onAbort(() => cancelTimer());
  const finish = (bodyEnded: boolean): void => {
    cancelTimer();
    stopListening();
    if (bodyEnded) endHeld(res, state);
    else closeHeld(res, state);
  };
  res.onData((chunk, isLast) => {
    if (state.done) return;
    dropped += chunk.byteLength;
    if (isLast) finish(true);
    else if (dropped > bounds.bytes) finish(false);
  });
  cancelTimer = (bounds.timer ?? realTimer)(() => finish(false), bounds.ms);
}
