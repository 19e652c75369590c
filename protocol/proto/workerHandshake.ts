// The worker's side of the handshake as a pure state machine: each step takes the state and what
// happened, and returns the next state, the messages to send and, when it is over badly, why to
// close. The connection code does the I/O; tests drive it message by message.
import type { Hello, Welcome } from './handshakeMessages.js';
import type { Message, Outgoing } from './messages.js';
import { tokensForChallenge, type PeerTokens } from './peerTokens.js';
import type { RejectCode } from './rejectCodes.js';

export interface HandshakeStep<S> {
  state: S;
  send: Outgoing[];
  /** set when the connection must end: the code and reason for the close frame */
  close?: { code: RejectCode; reason: string };
}

export type WorkerHandshakeState =
  | { phase: 'awaitingChallenge'; peers: PeerTokens | null }
  | { phase: 'awaitingWelcome' }
  | { phase: 'established'; welcome: Welcome }
  | { phase: 'rejected'; code: RejectCode; reason: string };

export type WorkerHello = Omit<Hello, 'v' | 't' | 'open'>;

/** `peers` null: no peers file, so the worker asks for open mode. */
export function startWorkerHandshake(hello: WorkerHello, peers: PeerTokens | null): HandshakeStep<WorkerHandshakeState> {
  return { state: { phase: 'awaitingChallenge', peers }, send: [{ t: 'hello', ...hello, open: peers === null }] };
}

const rejectWith = (code: RejectCode, reason: string, tell = true): HandshakeStep<WorkerHandshakeState> => ({
  state: { phase: 'rejected', code, reason },
  send: tell ? [{ t: 'reject', code, reason }] : [],
  close: { code, reason },
});

export function workerHandshakeReceive(state: WorkerHandshakeState, message: Message): HandshakeStep<WorkerHandshakeState> {
  if (state.phase === 'established' || state.phase === 'rejected') return { state, send: [] };
  // The server's own reject ends the handshake in any phase; there is nothing to answer.
  if (message.t === 'reject') return rejectWith(message.code, message.reason, false);
  if (state.phase === 'awaitingChallenge' && message.t === 'challenge') {
    const tokens = state.peers === null ? [] : tokensForChallenge(state.peers, message.projects);
    return { state: { phase: 'awaitingWelcome' }, send: [{ t: 'auth', nonce: message.nonce, tokens }] };
  }
  if (state.phase === 'awaitingWelcome' && message.t === 'welcome') return { state: { phase: 'established', welcome: message }, send: [] };
  const expected = state.phase === 'awaitingChallenge' ? 'challenge' : 'welcome';
  return rejectWith('unexpected_message', `expected ${expected} during the handshake, got ${message.t}`);
}

export function workerHandshakeTimeout(state: WorkerHandshakeState, seconds: number): HandshakeStep<WorkerHandshakeState> {
  if (state.phase === 'established' || state.phase === 'rejected') return { state, send: [] };
  return rejectWith('handshake_timeout', `no ${state.phase === 'awaitingChallenge' ? 'challenge' : 'welcome'} within ${seconds} s`);
}
