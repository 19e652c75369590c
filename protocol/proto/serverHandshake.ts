// The server's side of the handshake as a pure state machine. The two lookups it needs (which
// projects registered this worker; which tokens match their stored hashes) are
// asynchronous, so a step returns `need` and the server feeds the answer back as an event.
import type { Hello, ProjectToken, ProtoLimits } from './handshakeMessages.js';
import type { Message } from './messages.js';
import type { RejectCode } from './rejectCodes.js';
import type { HandshakeStep } from './workerHandshake.js';

export type ServerHandshakeState =
  | { phase: 'awaitingHello'; limits: ProtoLimits; software: string }
  | { phase: 'lookingUp'; limits: ProtoLimits; software: string; hello: Hello }
  | {
      phase: 'awaitingAuth'; limits: ProtoLimits; software: string; hello: Hello;
      nonce: Uint8Array; projects: readonly string[]; openModeProjects: readonly string[] | null;
    }
  | { phase: 'verifying'; limits: ProtoLimits; software: string; hello: Hello }
  | { phase: 'established'; hello: Hello; projects: readonly string[]; open: boolean }
  | { phase: 'rejected'; code: RejectCode; reason: string };

export type ServerHandshakeEvent =
  | { type: 'received'; message: Message }
  /** the answer to need 'lookup': the projects to challenge with, a fresh 32-byte nonce, and what open mode grants (null: open mode off) */
  | { type: 'challengeReady'; projects: readonly string[]; nonce: Uint8Array; openModeProjects: readonly string[] | null }
  /** the answer to need 'verify': the projects whose token verified */
  | { type: 'verified'; projects: readonly string[] }
  | { type: 'timeout'; seconds: number };

export interface ServerHandshakeStep extends HandshakeStep<ServerHandshakeState> {
  /** lookup: find the projects for `hello.workerId`; verify: check `tokens` */
  need?: { kind: 'lookup'; hello: Hello } | { kind: 'verify'; hello: Hello; tokens: ProjectToken[] };
}

export const startServerHandshake = (limits: ProtoLimits, software: string): ServerHandshakeState => ({ phase: 'awaitingHello', limits, software });

const reject = (code: RejectCode, reason: string, tell = true): ServerHandshakeStep => ({
  state: { phase: 'rejected', code, reason },
  send: tell ? [{ t: 'reject', code, reason }] : [],
  close: { code, reason },
});

const sameBytes = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((byte, i) => byte === b[i]);

function welcome(state: { limits: ProtoLimits; software: string; hello: Hello }, projects: readonly string[], open: boolean): ServerHandshakeStep {
  return {
    state: { phase: 'established', hello: state.hello, projects, open },
    send: [{ t: 'welcome', projects: [...projects], open, software: state.software, limits: state.limits }],
  };
}

function onAuth(state: Extract<ServerHandshakeState, { phase: 'awaitingAuth' }>, message: Extract<Message, { t: 'auth' }>): ServerHandshakeStep {
  if (!sameBytes(message.nonce, state.nonce)) return reject('bad_nonce', 'the auth does not echo this connection\'s challenge nonce');
  const challenged = new Set(state.projects.map((p) => p.toLowerCase()));
  // Tokens for projects that were not challenged are ignored rather than verified: each costs a lookup.
  const tokens = message.tokens.filter((t) => challenged.has(t.project.toLowerCase()));
  if (tokens.length > 0) return { state: { phase: 'verifying', limits: state.limits, software: state.software, hello: state.hello }, send: [], need: { kind: 'verify', hello: state.hello, tokens } };
  if (state.hello.open && state.openModeProjects !== null) return welcome(state, state.openModeProjects, true);
  if (state.hello.open) return reject('open_mode_refused', 'this server does not accept workers without a peer token (worker.peersFile)');
  return reject('no_token', `the worker holds no token for any of the ${state.projects.length} project(s) that registered it`);
}

export function serverHandshake(state: ServerHandshakeState, event: ServerHandshakeEvent): ServerHandshakeStep {
  if (state.phase === 'established' || state.phase === 'rejected') return { state, send: [] };
  if (event.type === 'timeout') return reject('handshake_timeout', `the handshake did not finish within ${event.seconds} s`);
  if (event.type === 'received') {
    const message = event.message;
    if (message.t === 'reject') return reject(message.code, message.reason, false);
    if (state.phase === 'awaitingHello' && message.t === 'hello') {
      return { state: { phase: 'lookingUp', limits: state.limits, software: state.software, hello: message }, send: [], need: { kind: 'lookup', hello: message } };
    }
    if (state.phase === 'awaitingAuth' && message.t === 'auth') return onAuth(state, message);
    const expected = state.phase === 'awaitingHello' ? 'hello' : state.phase === 'awaitingAuth' ? 'auth' : 'nothing until the server answers';
    return reject('unexpected_message', `expected ${expected} during the handshake, got ${message.t}`);
  }
  if (event.type === 'challengeReady' && state.phase === 'lookingUp') {
    if (event.nonce.length !== 32) throw new Error('the challenge nonce must be 32 random bytes');
    if (state.hello.open && event.openModeProjects === null) {
      return reject('open_mode_refused', 'this server does not accept workers without a peer token (worker.peersFile)');
    }
    return {
      state: { ...state, phase: 'awaitingAuth', nonce: event.nonce, projects: event.projects, openModeProjects: event.openModeProjects },
      send: [{ t: 'challenge', nonce: event.nonce, projects: [...event.projects] }],
    };
  }
  if (event.type === 'verified' && state.phase === 'verifying') {
    if (event.projects.length === 0) return reject('bad_token', 'none of the presented peer tokens is valid for its project');
    return welcome(state, event.projects, false);
  }
  throw new Error(`serverHandshake: ${event.type} does not fit the phase ${state.phase}`);
}
