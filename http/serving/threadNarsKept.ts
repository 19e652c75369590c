// Sends of NAR files a serving thread keeps in memory (threadNars.ts; docs/http.md, "Serving
// threads"). Small and medium files alike are written with tryEnd's backpressure, in views of the
// kept bytes: uWS copies none of what a slow reader's socket does not take (review r7a-1: end()
// copied up to nar.smallBytes per connection, so many trickle readers of one small file held a
// megabyte each, unbounded). A send that outlasts uWS's handler keeps its file in memory until it
// ends (the file stays counted in the memory's budget) and is held to the minimum read pace
// (storage/nars/readPace.ts): below it the connection is closed, as on the streamed path.
import type { HttpResponse } from 'uWebSockets.js';
import type { NarAnswerHead } from '../cache/narHeaders.js';
import { streamReply } from '../reply.js';
import { beginBytesInCallback, respond, respondRest, ResponseState } from '../respond.js';
import { watchReadPace, type PaceClock, type ReadPaceLimits } from '../../storage/threadFace.js';
import type { NarMemory } from './narMemory.js';
import { paced, slices } from './pacedPieces.js';

export interface KeptSendOptions {
  pace: ReadPaceLimits;
  paceClock?: PaceClock;
  /** a reader below the minimum pace: its connection is closed */
  tooSlow(res: HttpResponse, state: ResponseState): void;
}

/** The part of the kept bytes an answer sends (a view, no copy). */
const keptPart = (bytes: Buffer, answer: NarAnswerHead): Buffer =>
  answer.start === 0 && answer.length === bytes.length ? bytes : bytes.subarray(answer.start, answer.start + answer.length);

/**
 * Answers inside uWS's handler from kept bytes: what the socket takes at once is written there (a
 * whole small file, usually: null, the answer ended); the rest follows as the socket takes it (the
 * promise of the send's end, with its state).
 */
export function sendKeptInCallback(opts: KeptSendOptions, res: HttpResponse, memory: NarMemory, fileHash: string, bytes: Buffer, answer: NarAnswerHead): Promise<ResponseState> | null {
  const body = keptPart(bytes, answer);
  const taken = beginBytesInCallback(res, answer.status, answer.headers, body);
  if (taken === body.length) return null;
  const state = new ResponseState();
  res.onAborted(() => state.abort());
  const rest = body.subarray(taken);
  return held(opts, res, state, memory, fileHash, taken, (pace) => respondRest(res, state, body.length, taken, { [Symbol.asyncIterator]: () => paced(slices(rest), pace) }))
    .then(() => state, () => state);
}

/** Answers from kept bytes after the request waited (its state is set up): the whole answer as the socket takes it. */
export function sendKept(opts: KeptSendOptions, res: HttpResponse, state: ResponseState, memory: NarMemory, fileHash: string, bytes: Buffer, answer: NarAnswerHead): Promise<void> {
  const body = keptPart(bytes, answer);
  return held(opts, res, state, memory, fileHash, 0, (pace) =>
    respond(res, state, streamReply(answer.status, answer.length, { [Symbol.asyncIterator]: () => paced(slices(body), pace) }, answer.headers), false));
}

/** A send that outlasts the handler: its file stays kept, its pace watched. */
async function held(
  opts: KeptSendOptions, res: HttpResponse, state: ResponseState, memory: NarMemory, fileHash: string, taken: number,
  write: (pace: { add(bytes: number): void }) => Promise<void>,
): Promise<void> {
  const ended = memory.sending(fileHash);
  const pace = watchReadPace(opts.pace, () => opts.tooSlow(res, state), opts.paceClock);
  pace.add(taken);
  try {
    await write(pace);
  } finally {
    pace.stop();
    ended();
  }
}
